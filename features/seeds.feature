Feature: Configuration as in the seeds
  A Kurator Application's rollout block and a Kanary validation block,
  pasted into flotilla's configuration, are accepted as they are where their
  fields mean something here; a field flotilla cannot honour is an error
  that names it. The seeds' examples live in config/examples/.

  Scenario Outline: A seed's example configuration is valid as it is
    When `flotilla config check` runs on "<file>" with its secrets in the environment
    Then it reports the configuration valid

    Examples:
      | file                             |
      | config/example.yaml              |
      | config/examples/podinfo-istio.yaml |
      | config/examples/podinfo-kuma.yaml  |

  Scenario Outline: A pasted field flotilla cannot honour is refused, naming it
    When `flotilla config check` runs on "config/examples/podinfo-istio.yaml" with "<field>" set to "<value>"
    Then it fails naming "<named>" because "<reason>"

    Examples:
      | field                               | value        | named                               | reason                                              |
      | applications[0].workload.apiVersion | apps/v1beta1 | applications[0].workload.apiVersion | Flagger targets apps/v1 Deployments and DaemonSets  |
      | applications[0].validation.noUpdate | true         | applications[0].validation.noUpdate | true is not supported                               |
      | applications[0].service.name        | frontend     | applications[0].serviceName         | differs from service.name                           |
      | applications[0].delivery.interval   | 30s          | applications[0].rolloutPolicy       | set either delivery or rolloutPolicy                |
