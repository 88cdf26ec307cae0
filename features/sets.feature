Feature: Release sets: several applications promoted as one
  Applications declared as one release set (releaseSets) go through the
  waves as one rollout of the repository's commit. In each cluster the
  members are applied in their dependsOn order, each once the one before
  is ready (the migration Job complete, the API's canary promoted), so a
  frontend never runs a version whose API is not promoted there; a
  cluster succeeds once every member's canary promoted, and one member
  failing rolls the whole set back, dependents first, in every cluster
  the version reached.

  # Catches: members rolled out as separate rollouts (two rollouts of the
  # commit, or one per member); members applied together (the frontend's
  # primary on the commit in c1 while the api's is not yet, or in c4,
  # where the api failed, the frontend's workload on the commit at all); a
  # set judged by one canary (the set succeeds in c4 on the frontend's
  # promotion); a rollback that restores some members only (the frontend
  # or the Job left at the failed commit in c1), or that reverts the api
  # before the frontend (the frontend's primary then runs the commit with
  # the api's back on the first).
  Scenario: A release set of frontend + api (+ a migration Job first): promoted together; the api failing in wave 2 rolls back all three everywhere; the frontend never ran a version whose api was not there
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And flotilla serving the release set "shop" in waves "c1" then "c4"
    And the web UI is open in a browser
    And the repository's first commit has been rolled out to every cluster
    And the application's workloads are watched in every cluster
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of every member of the set to "v2"
    Then the rollout of that commit is rolled back
    And that commit had one rollout, the set "shop"'s, with the members "shop-migrate,shop-api,shop-frontend"
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And in cluster "c1" the primary of "shop-frontend" ran that commit, after the primary of "shop-api" did
    And in cluster "c4" Flagger failed the canary "shop-api" and the workload "shop-frontend" never ran that commit
    And in no cluster did the primary of "shop-frontend" run that commit while the primary of "shop-api" did not
    And `flotilla describe rollout` of that commit and the web UI's page of it name the members "shop-migrate,shop-api,shop-frontend" in order
