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

  # Catches a set left out of the check of the clusters (a cluster that
  # enters the set's waves waits for the next push), a catch-up that brings
  # the lead alone (the frontend or the Job missing in c4) or the first
  # commit rather than the set's validated one, and one started twice.
  Scenario: A cluster added to a release set's last wave gets every member at the set's validated commit without a push
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And flotilla checks the clusters against the validated digest every "2s"
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    And a push changes the greeting of every member of the set to "v2"
    And the rollout of that commit succeeds
    And the application's namespace exists in cluster "c4"
    When flotilla is restarted with cluster "c4" added to the last wave
    Then a rollout of kind "catch-up" of that commit to "c4" succeeds
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run that commit, greeting "v2"
    And the Job "shop-migrate" in every cluster ran that commit, greeting "v2"
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And after flotilla is restarted again and checks 3 more times, exactly 1 rollout of kind "catch-up" was started

  # Catches a check that reads the lead's primary only (the frontend's
  # change goes unseen), a drift reported under a member rather than the
  # set, a member's driftPolicy taken instead of the set's, and a revert
  # that re-applies without a new revision (the frontend's primary keeps
  # the hand's image) or goes to every cluster.
  Scenario: A release set member's primary changed by hand is restored with the set's driftPolicy: revert
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When the primary of "shop-frontend" in cluster "c2" is set by hand to image "registry.example.com/shop-frontend:6.6.6"
    Then flotilla journals the drift of cluster "c2" to image "registry.example.com/shop-frontend:6.6.6" from the first commit within 10 seconds
    And a rollout of kind "drift-revert" of the first commit to "c2" succeeds
    And the primary of "shop-frontend" in cluster "c2" runs image "registry.example.com/shop-frontend:1.0.0"
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the API says that rollout is of kind "drift-revert" and goes to "c2" only

  # Catches a Job member's failure shown in the cluster's message only (no
  # state of the Job in the API's rollout, `flotilla describe rollout` or
  # the UI's cluster card), a state that is not the Job's own (another
  # reason, or complete), and the api or frontend applied after their Job
  # failed.
  Scenario: A release set's migration Job failing in wave 1 shows in the rollout as failed with the Job's reason
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    And the web UI is open in a browser
    And the repository's first commit has been rolled out to every cluster
    When a push changes the greeting of every member of the set to "v2" and makes the Job "shop-migrate" fail
    Then the Job "shop-migrate" in cluster "c1" fails at that commit
    And the rollout of that commit is rolled back
    And flotilla's rollout of that commit shows in cluster "c1" the Job "shop-migrate" failed with the Job's reason, as `flotilla describe rollout` and the web UI's card of that cluster do
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run the first commit, greeting "hello"

  # Catches a set's freezeWindows refused or accepted and ignored (the set
  # rolls out inside its window: a member's workload or the Job on the
  # commit before the window's end), a set that the window holds forever
  # (it is released when the window ends), and a UI card without the
  # Job's state (or another than complete).
  Scenario: A release set's own freeze window holds its rollout and releases it when it ends
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And the release set's own freeze window "shop-freeze" holds it for the next 30 seconds
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    And the application's workloads are watched in every cluster
    And the web UI is open in a browser
    When the repository's first commit is pushed to the set
    Then the rollout of that commit waits for the freeze window "shop-freeze"
    And the rollout of that commit succeeds
    And no member's workload or Job in any cluster ran that commit before the freeze window ended
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run that commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran that commit, greeting "hello", and the web UI's card of every cluster of that rollout says it complete

  # Catches a set refused on the Tekton executor, or run there without its
  # members (the PipelineRun applying the lead alone: the frontend and the
  # Job left on the first commit), or with its members applied together
  # (the frontend's primary on the commit before the api's).
  Scenario: A release set rolled out by Tekton pipelines applies its members in order in every cluster
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    And the application's workloads are watched in every cluster
    When a push changes the greeting of every member of the set to "v2"
    Then the rollout of that commit succeeds
    And every cluster's succeeded PipelineRun of that commit carries the members "shop-migrate,shop-api,shop-frontend" in order
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run that commit, greeting "v2"
    And the Job "shop-migrate" in every cluster ran that commit, greeting "v2"
    And in cluster "c2" the primary of "shop-frontend" ran that commit, after the primary of "shop-api" did

  # Catches a set left in the default project whatever a project lists
  # (another project's approver, or anyone's, would release it), a
  # project listing the set refused, and the set's rollout authorized by
  # its members' projects instead of its own.
  Scenario: A release set's wave is approved in the set's project: another project's approver is refused
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then "shop-frontend"
    And the release set "shop" is in project "payments", whose approver is the API token "pat", and project "web"'s approver is the API token "walt"
    And wave 2 needs 1 approval
    And flotilla serving the release set "shop" in waves "c1" then "c2"
    When the repository's first commit is pushed to the set
    Then the rollout of that commit waits for the approval of wave 2
    When "walt" approves wave 2 of the rollout of that commit and is refused: "walt may not approve in project payments (needs approve)"
    Then no member of the set is in cluster "c2" 5 seconds later
    When "pat" approves wave 2 of the rollout of that commit
    Then the rollout of that commit succeeds
    And the primary and the workload of "shop-api,shop-frontend" in every cluster run that commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran that commit, greeting "hello"

  # A set of image members: its version is one image per member, a push
  # moving one member. Catches: the push rolled out as the member's own
  # rollout (not the set's: no rollout of "web-api:1.1.0,web-frontend:2.0.0");
  # the frontend touched by the api's push (its workload or primary off
  # 2.0.0); the lead's Canary not listing the frontend's (the set judged by
  # the api alone); a cluster never judged (the members' mixed images read
  # as no version: the rollout never succeeds).
  Scenario: A release set of image members: a push of the api's image rolls the set through the waves with the frontend unchanged
    Given a registry
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" succeeds
    And the primary and the workload of "web-api" in every cluster run version "1.1.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And the Canary "web-api" in every cluster lists the canaries "web-api,web-frontend"

  # Catches: a rollback that restores the api alone, or none of c1's
  # members (c1 succeeded before c4 failed); a revert judged against the
  # fleet's previous version rather than what each cluster ran; the
  # frontend moved by the revert.
  Scenario: A release set of image members: the api's image failing in wave 2 rolls both members back everywhere
    Given a registry
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    And the analysis gate fails for the canary "web-api" in cluster "c4"
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" is rolled back
    And the primary and the workload of "web-api" in every cluster run version "1.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And no workload in any cluster runs version "1.1.0"

  # Catches a set of image members left out of the check of the clusters
  # (c4, entering the waves, waits for the next push), a catch-up that
  # brings the lead alone (the frontend's workload left on 0.1.0 in c4,
  # without a primary), one carrying the members' pushes rather than the
  # deployed tuple (the api's 1.0.0, not the tuple's hash), and one
  # started twice.
  Scenario: A cluster added to a release set of image members' last wave gets every member at the set's deployed versions without a push
    Given a registry
    And flotilla checks the clusters against the validated digest every "2s"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    And the workload "web-api" runs its old version in cluster "c4"
    And the workload "web-frontend" runs its old version in cluster "c4"
    When flotilla is restarted with cluster "c4" added to the last wave
    Then a rollout of kind "catch-up" of "web-api:1.0.0,web-frontend:2.0.0" to "c4" succeeds
    And the primary and the workload of "web-api" in every cluster run version "1.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And the Canary "web-api" in every cluster lists the canaries "web-api,web-frontend"
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And after flotilla is restarted again and checks 3 more times, exactly 1 rollout of kind "catch-up" was started

  # Catches a check that holds each primary against the tuple's hash (a
  # fresh set drifted everywhere) or reads the lead's primary only (the
  # frontend's change goes unseen), a drift reported under the member
  # rather than the set, a member's driftPolicy taken instead of the
  # set's, and a revert that goes to every cluster, leaves the hand's image
  # or moves the api.
  Scenario: A release set image member's primary changed by hand is restored with the set's driftPolicy: revert
    Given a registry
    And flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    When the primary of "web-frontend" in cluster "c2" is set by hand to image "registry.example.com/web-frontend:6.6.6"
    Then flotilla journals the drift of the member "web-frontend" in cluster "c2" to image "registry.example.com/web-frontend:6.6.6" from "web-api:1.0.0,web-frontend:2.0.0" within 10 seconds
    And a rollout of kind "drift-revert" of "web-api:1.0.0,web-frontend:2.0.0" to "c2" succeeds
    And the primary of "web-frontend" in cluster "c2" runs version "2.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And the primary and the workload of "web-api" in every cluster run version "1.0.0" by digest
    And the API says that rollout is of kind "drift-revert" and goes to "c2" only

  # Catches a set whose members are not polled (the api's 1.1.0 never
  # rolled out), a member polled as its own application (a rollout of
  # "1.1.0" rather than the set's), and the frontend moved by it.
  Scenario: A push of a release set member whose webhook is lost is found by the poll and rolls the set out
    Given a registry
    And flotilla polls the applications' registries every "2s"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    When version "1.1.0" of "web-api" is pushed without its registry notification
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" starts within 10 seconds
    And the rollout of "web-api:1.1.0,web-frontend:2.0.0" succeeds
    And the primary and the workload of "web-api" in every cluster run version "1.1.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And the API says the set's rollout of "web-api:1.1.0,web-frontend:2.0.0" came from a "poll"
    And no rollout of "1.1.0" was started

  # The set of image members on the Tekton executor: each cluster's
  # PipelineRun carries the members with their images to apply-canary's
  # step. Catches the set refused on Tekton, a PipelineRun carrying the
  # lead alone (the frontend's Canary not listed, the set judged by the
  # api), members not pinned at the tuple's digests, and previous-members
  # not coming back through Tekton's results (each cluster's previous
  # version then unknown).
  Scenario: A release set of image members rolled out by Tekton pipelines: a push of the api's image rolls the set through the waves with the frontend unchanged
    Given a registry
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" succeeds
    And the primary and the workload of "web-api" in every cluster run version "1.1.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And the Canary "web-api" in every cluster lists the canaries "web-api,web-frontend"
    And every cluster's succeeded PipelineRun of the rollout of "web-api:1.1.0,web-frontend:2.0.0" carries the members "web-api:1.1.0,web-frontend:2.0.0" by digest, and says they ran "web-api:1.0.0,web-frontend:2.0.0" before

  # Catches, on Tekton: a rollback that restores the api alone, or leaves
  # c1 (succeeded before c4 failed) on 1.1.0 because its PipelineRun's
  # previous-members never came back, and the frontend moved by the revert.
  Scenario: A release set of image members on Tekton: the api's image failing in wave 2 rolls both members back everywhere
    Given a registry
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    And the analysis gate fails for the canary "web-api" in cluster "c4"
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" is rolled back
    And the primary and the workload of "web-api" in every cluster run version "1.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And no workload in any cluster runs version "1.1.0"

  # Catches a member's own verify not applied (the unsigned api rolled out,
  # a primary of it in c1), applied to the other member too (the
  # frontend's unsigned 2.0.0 refused), a refusal recorded on the member
  # rather than the set (describe shows no skipped push of the set), and a
  # signed push not moving the set (or moving the frontend).
  Scenario: A release set image member with its own verify: its unsigned push is refused and no cluster changes; its signed push rolls the set out
    Given a registry
    And the application accepts only images signed with the key "release"
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" signed with the key "release" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    When version "1.1.0" of "web-api" is pushed
    Then the push of "1.1.0" is rejected saying "web-api: "
    And `flotilla describe application web` says the last push skipped was "1.1.0", because "is not signed"
    And the workloads of every cluster stay unchanged for 10 seconds
    And the primary and the workload of "web-api" in every cluster run version "1.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
    When version "1.2.0" signed with the key "release" is pushed
    Then the rollout of "web-api:1.2.0,web-frontend:2.0.0" succeeds
    And the rollout of "web-api:1.2.0,web-frontend:2.0.0" records the signature of the key "release"
    And the primary and the workload of "web-api" in every cluster run version "1.2.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest

  # What each entry's verify found is shown, not only kept in the API.
  # Catches: describe naming only the pushed member's signer (or none), an
  # unsigned entry's reason dropped, the api's signer lost when the
  # frontend's push takes its entry along from the deployed version, the
  # wave the rollout stops before unsaid, and the unsigned api sent past
  # wave 1 (a primary of it in c2 or c4).
  Scenario: A release set image member's unsigned build stops before the wave requiring a signature; `flotilla describe rollout` names each entry's signer, or why it is unsigned
    Given a registry
    And the application accepts only images signed with the key "release"
    And wave 1 takes unsigned images
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" signed with the key "release" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    When version "2.0.0" of "web-frontend" is pushed
    Then the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    And `flotilla describe rollout` of "web-api:1.0.0,web-frontend:2.0.0" says the entry "web-api 1.0.0" is signed with the key "release"
    And `flotilla describe rollout` of "web-api:1.0.0,web-frontend:2.0.0" says the entry "web-frontend 2.0.0" has no signer recorded
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" succeeds
    And `flotilla describe rollout` of "web-api:1.1.0,web-frontend:2.0.0" says the entry "web-api 1.1.0" is unsigned, because "is not signed"
    And `flotilla describe rollout` of "web-api:1.1.0,web-frontend:2.0.0" says the entry "web-frontend 2.0.0" has no signer recorded
    And `flotilla describe rollout` of "web-api:1.1.0,web-frontend:2.0.0" says it stops before "wave-2"
    And the primary of "web-api" in cluster "c1" runs version "1.1.0" by digest
    And the primary of "web-api" in cluster "c2" runs version "1.0.0" by digest
    And the primary of "web-api" in cluster "c4" runs version "1.0.0" by digest
    And the primary and the workload of "web-frontend" in every cluster run version "2.0.0" by digest

  # A release set of git and image members (docs/design/release-sets.md,
  # "Git and image members"): the migration Job and the api rendered from
  # the repository, the frontend an image pushed by CI. Catches: the
  # frontend's push planned as a rollout of its own or refused (a mixed set
  # refused at config load); its tuple dropping the git members (the api's
  # primary or the Job left off the set's commit, or re-rendered at
  # another); the frontend rendered from the repository (it has no paths)
  # rather than set to its image; a cluster never judged (the api's
  # revision and the frontend's image read as no version of the set's).
  Scenario: A release set of git and image members: a push of the frontend's image rolls the set through the waves, the api and its migration Job on the set's commit
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When version "2.1.0" of "shop-frontend" is pushed
    Then the set's rollout of the first commit and "2.1.0" of "shop-frontend" succeeds
    And the primary and the workload of "shop-frontend" in every cluster run version "2.1.0" by digest
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-api" in every cluster lists the canaries "shop-api,shop-frontend"

  # Catches: a rollback that restores the api alone, or none of c1's
  # members (c1 succeeded before c4 failed); a revert at the tuple's hash
  # rather than the cluster's previous commit; the Job left on the failed
  # commit; the frontend moved off its version by the set's revert, or
  # set before the api's analysis in c4 ended.
  Scenario: A release set of git and image members: the api failing in wave 2 rolls the set back everywhere, the frontend kept on its version
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And the application's workloads are watched in every cluster
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of that commit and "2.0.0" of "shop-frontend" is rolled back
    And the watch saw the primary of "shop-api" in cluster "c1" run that commit
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest

  # A release set of git and image members led by its image member
  # (docs/design/release-sets.md, "An image lead"): the frontend listed
  # first and depending on nothing is applied first in each cluster, and
  # its Canary lists the api's. Catches: the set's first commit failing
  # or never judged (the frontend, with no entry yet, rendered from paths
  # it has not, its canary not applied or listing only itself: the
  # cluster judged by the frontend alone); the set's commits not matched
  # (the set's source taken from its image lead); the frontend's push
  # leaving the api or the Job off the commit; a rollback that leaves the
  # api on the failed commit or moves the frontend off its version.
  Scenario: A release set of git and image members led by its image member: the frontend's Canary lists the api's, the set rolled through the waves and rolled back everywhere
    Given a deployments repository with the release set "shop": the image application "shop-frontend" that tracks "demo/shop-frontend" leading, then the Job "shop-migrate", then "shop-api"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    When version "2.0.0" of "shop-frontend" is pushed
    Then the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    Given the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of that commit and "2.0.0" of "shop-frontend" is rolled back
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest

  # Catches a check that skips such a set; one that holds the frontend
  # against what the commit renders (it has no manifest there: never
  # compared, its change unseen) or against the tuple's hash (drifted
  # everywhere: a revert with no change), or the api against the tuple's
  # hash rendered as a commit (never compared, its change unseen); a drift
  # reported under the member rather than the set; a revert that goes to
  # every cluster, leaves the hand's image, moves the frontend off its
  # version or re-renders the api at another commit.
  Scenario: A release set of git and image members' primaries changed by hand are restored with the set's driftPolicy: revert, the frontend to its version, the api to the set's commit
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And in 4 seconds no rollout of kind "drift-revert" was started
    When the primary of "shop-frontend" in cluster "c2" is set by hand to image "registry.example.com/shop-frontend:6.6.6"
    Then flotilla journals the drift of the member "shop-frontend" in cluster "c2" to image "registry.example.com/shop-frontend:6.6.6" from the set's version of the first commit and "2.0.0" of "shop-frontend" within 10 seconds
    And a rollout of kind "drift-revert" of the set's version of the first commit and "2.0.0" of "shop-frontend" to "c2" succeeds
    And the primary of "shop-frontend" in cluster "c2" runs version "2.0.0" by digest
    When the primary of "shop-api" in cluster "c4" is set by hand to image "registry.example.com/shop-api:6.6.6"
    Then flotilla journals the drift of the member "shop-api" in cluster "c4" to image "registry.example.com/shop-api:6.6.6" from the set's version of the first commit and "2.0.0" of "shop-frontend" within 10 seconds
    And a rollout of kind "drift-revert" of the set's version of the first commit and "2.0.0" of "shop-frontend" to "c4" succeeds
    And the primary of "shop-api" in cluster "c4" runs image "registry.example.com/shop-api:1.0.0"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And the API says that rollout is of kind "drift-revert" and goes to "c4" only

  # Catches a set whose emptied cluster is never caught up (the check
  # skipping such a set, or reading the frontend against the commit's
  # render), a catch-up without the deployed tuple (a run naming no commit,
  # or the frontend applied without its entry), or one going to every
  # cluster.
  Scenario: A release set of git and image members whose api canary is deleted in a cluster is caught up there with the set's deployed version
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla checks the clusters against the validated digest every "2s"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When the canary of "shop-api" in cluster "c4" is deleted with its primary
    Then a rollout of kind "catch-up" of the set's version of the first commit and "2.0.0" of "shop-frontend" to "c4" succeeds
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And the Canary "shop-api" in every cluster lists the canaries "shop-api,shop-frontend"
    And the API says that rollout is of kind "catch-up" and goes to "c4" only

  # Drift of a set led by its image member (release-sets.md, "An image
  # lead"), with the set's driftPolicy: revert. Before the frontend's first
  # push the deployed tuple has no entry of it: the frontend is not read
  # (no false drift of its 0.1.0) while the api is, and the drift-revert's
  # run applies the frontend's canary alone; after it, the frontend is
  # held against its entry. Catches: the lead without an entry read as
  # drifted (a drift-revert in the first 4 s), or its drift-revert run
  # failing (the lead sent with an image it has no entry for, or left out:
  # no canary listing the api's); the api's change unseen or reverted off
  # the commit; the frontend's change unseen once it has an entry, or
  # reverted off 2.0.0; a revert going to every cluster.
  Scenario: A release set of git and image members led by its image member: primaries changed by hand are restored with the set's driftPolicy: revert, the api before the frontend's first push, the frontend after it
    Given a deployments repository with the release set "shop": the image application "shop-frontend" that tracks "demo/shop-frontend" leading, then the Job "shop-migrate", then "shop-api"
    And flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And in 4 seconds no rollout of kind "drift-revert" was started
    When the primary of "shop-api" in cluster "c4" is set by hand to image "registry.example.com/shop-api:6.6.6"
    Then flotilla journals the drift of the member "shop-api" in cluster "c4" to image "registry.example.com/shop-api:6.6.6" from the set's version of the first commit alone within 10 seconds
    And a rollout of kind "drift-revert" of the set's version of the first commit alone to "c4" succeeds
    And the API says that rollout is of kind "drift-revert" and goes to "c4" only
    And the primary of "shop-api" in cluster "c4" runs image "registry.example.com/shop-api:1.0.0"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    Given version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When the primary of "shop-frontend" in cluster "c2" is set by hand to image "registry.example.com/shop-frontend:6.6.6"
    Then flotilla journals the drift of the member "shop-frontend" in cluster "c2" to image "registry.example.com/shop-frontend:6.6.6" from the set's version of the first commit and "2.0.0" of "shop-frontend" within 10 seconds
    And a rollout of kind "drift-revert" of the set's version of the first commit and "2.0.0" of "shop-frontend" to "c2" succeeds
    And the API says that rollout is of kind "drift-revert" and goes to "c2" only
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"

  # Catch-up of a set led by its image member (release-sets.md, "An image
  # lead"): before the frontend's first push the deployed tuple has no
  # entry of it, so the catch-up's run applies its canary alone (listing
  # the api's) and the git members; after it, the frontend's own canary
  # and primary gone are caught up with its entry. Catches: the api's
  # deletion never caught up (the reconciler skipping such a set, or
  # reading the lead without an entry and finding it missing: a catch-up
  # that fails or never ends), a catch-up's run without the lead (no
  # canary listing the api's: the cluster never judged) or with an image
  # it has no entry for; the frontend's deletion unseen (the lead not held
  # against its entry) or caught up off its version; a catch-up going to
  # every cluster.
  Scenario: A release set of git and image members led by its image member is caught up where a canary was deleted: the api's before the frontend's first push, the frontend's after it
    Given a deployments repository with the release set "shop": the image application "shop-frontend" that tracks "demo/shop-frontend" leading, then the Job "shop-migrate", then "shop-api"
    And flotilla checks the clusters against the validated digest every "2s"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    When the canary of "shop-api" in cluster "c4" is deleted with its primary
    Then a rollout of kind "catch-up" of the set's version of the first commit alone to "c4" succeeds
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    Given version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When the canary of "shop-frontend" in cluster "c2" is deleted with its primary
    Then a rollout of kind "catch-up" of the set's version of the first commit and "2.0.0" of "shop-frontend" to "c2" succeeds
    And the API says that rollout is of kind "catch-up" and goes to "c2" only
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"

  # The set of git and image members on the Tekton executor: each
  # cluster's PipelineRun runs apply-manifests at the tuple's commit, its
  # members param carrying the Job and the api (rendered there) and the
  # frontend with its entry's image. Catches the set refused on Tekton, a
  # PipelineRun carrying the git members alone (the frontend left on
  # 2.0.0) or sent to apply-canary (the api and the Job not rendered), the
  # frontend not pinned at its digest, and previous-member-revisions not
  # coming back through Tekton's results (each cluster's previous version
  # then unknown).
  Scenario: A release set of git and image members rolled out by Tekton pipelines: a push of the frontend's image rolls the set through the waves, the api and its migration Job on the set's commit
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When version "2.1.0" of "shop-frontend" is pushed
    Then the set's rollout of the first commit and "2.1.0" of "shop-frontend" succeeds
    And the primary and the workload of "shop-frontend" in every cluster run version "2.1.0" by digest
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-api" in every cluster lists the canaries "shop-api,shop-frontend"
    And every cluster's succeeded PipelineRun of the set's rollout of the first commit and "2.1.0" of "shop-frontend" carries its members in order, the frontend by digest, and says the api ran the first commit and the frontend "2.0.0" before

  # Catches, on Tekton: a rollback that restores the api alone, or none of
  # c1's members (c1 succeeded before c4 failed: its previous version
  # comes from its PipelineRun's previous-member-revisions); a revert at
  # the tuple's hash rather than the cluster's previous commit, or in the
  # apply's order (the api back before the frontend); the Job left on the
  # failed commit; the frontend moved off its version.
  Scenario: A release set of git and image members on Tekton: the api failing in wave 2 rolls the set back everywhere, the frontend kept on its version
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And the application's workloads are watched in every cluster
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of that commit and "2.0.0" of "shop-frontend" is rolled back
    And the watch saw the primary of "shop-api" in cluster "c1" run that commit
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And in cluster "c1" the succeeded PipelineRun rolling back the set's rollout of that commit and "2.0.0" of "shop-frontend" applies the first commit, the members "shop-frontend:2.0.0,shop-api,shop-migrate" in order

  # Both kinds moved in one rollout, then rolled back, on Tekton: the
  # frontend's push of 2.1.0 and then a push to the branch arrive while
  # the line is stopped, so the branch's rollout supersedes the frontend's
  # before any cluster took it and carries both (that commit and 2.1.0).
  # Catches: the frontend's new version dropped by the git push's tuple
  # (its baseline the deployed tuple rather than the rollout in flight:
  # c1's frontend never on 2.1.0); a revert that restores one kind only
  # (c1's api back but its frontend left on 2.1.0, or the other way
  # round), or at the tuple's hash, or the api back before the frontend;
  # the frontend restored to the superseded rollout's 2.1.0 rather than
  # what the cluster ran before (2.0.0).
  Scenario: A release set of git and image members on Tekton: a push to the branch while the frontend's rollout waits carries both, and the api failing in wave 2 rolls both kinds back everywhere
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And the application's workloads are watched in every cluster
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When `flotilla fleet stop` is run
    And version "2.1.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.1.0" of "shop-frontend" starts
    And a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of the first commit and "2.1.0" of "shop-frontend" is superseded
    When `flotilla fleet start` is run
    Then the set's rollout of that commit and "2.1.0" of "shop-frontend" is rolled back
    And cluster "c1"'s succeeded PipelineRun of the set's rollout of that commit and "2.1.0" of "shop-frontend" carries its members in order, the frontend by digest, and says the api ran the first commit and the frontend "2.0.0" before
    And the watch saw the primary of "shop-api" in cluster "c1" run that commit
    And the watch saw the primary of "shop-frontend" in cluster "c1" run version "2.1.0"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.0.0" by digest
    And in cluster "c1" the succeeded PipelineRun rolling back the set's rollout of that commit and "2.1.0" of "shop-frontend" applies the first commit, the members "shop-frontend:2.0.0,shop-api,shop-migrate" in order

  # The set led by its image member (release-sets.md, "An image lead") on
  # the Tekton executor: each cluster's PipelineRun runs apply-manifests at
  # the tuple's commit, the frontend first in its members param. Catches,
  # on Tekton: the set's first commit failing or never judged (the frontend
  # without an entry dropped from the members param, sent with an image or
  # paths it has not, its canary not applied or listing only itself); the
  # members in the git lead's order (the frontend after the api); the
  # frontend not pinned at its digest, or its and the api's previous
  # revisions not coming back through Tekton's results; a rollback that
  # leaves the api or the Job on the failed commit, or reverts in the
  # apply's order rather than reversed (the api, the Job, then the
  # frontend at the cluster's previous version), or moves the frontend off
  # its version.
  Scenario: A release set of git and image members led by its image member rolled out by Tekton pipelines: the frontend's Canary lists the api's, its push rolled through the waves, the api failing in wave 2 rolls the set back everywhere
    Given a deployments repository with the release set "shop": the image application "shop-frontend" that tracks "demo/shop-frontend" leading, then the Job "shop-migrate", then "shop-api"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And every cluster's succeeded PipelineRun of the set's rollout of the first commit alone applies the first commit, the members "shop-frontend,shop-migrate,shop-api" in order
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    When version "2.1.0" of "shop-frontend" is pushed
    Then the set's rollout of the first commit and "2.1.0" of "shop-frontend" succeeds
    And the primary and the workload of "shop-frontend" in every cluster run version "2.1.0" by digest
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the Canary "shop-frontend" in every cluster lists the canaries "shop-frontend,shop-api"
    And every cluster's succeeded PipelineRun of the set's rollout of the first commit and "2.1.0" of "shop-frontend" carries its members in order, the frontend by digest, and says the api ran the first commit and the frontend "2.0.0" before
    Given the application's workloads are watched in every cluster
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of that commit and "2.1.0" of "shop-frontend" is rolled back
    And the watch saw the primary of "shop-api" in cluster "c1" run that commit
    And the primary and the workload of "shop-api" in every cluster run the first commit, greeting "hello"
    And the Job "shop-migrate" in every cluster ran the first commit, greeting "hello"
    And the primary and the workload of "shop-frontend" in every cluster run version "2.1.0" by digest
    And in cluster "c1" the succeeded PipelineRun rolling back the set's rollout of that commit and "2.1.0" of "shop-frontend" applies the first commit, the members "shop-api,shop-migrate,shop-frontend:2.1.0" in order
