package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/testkit/rekortest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

const (
	oneCluster = `
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
`
	app = `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
`
)

// withApp returns an applications section of one valid application, plus
// extra fields appended to it (indented four spaces).
func withApp(extra string) string {
	return app + extra
}

func TestValidate(t *testing.T) {
	dir := testDir(t)
	writeFile(t, filepath.Join(dir, "empty-secret"), "\n")
	writeFile(t, filepath.Join(dir, "not-json"), "auths: {}\n")
	writeFile(t, filepath.Join(dir, "no-auths"), `{"credsStore": "desktop"}`)
	writeFile(t, filepath.Join(dir, "good.json"), `{"auths": {"registry.example.com": {"auth": "dTpw"}}}`)
	writeSigningFiles(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "kubedir"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOTILLA_EMPTY", "")

	tests := []struct {
		name string
		doc  sections
		want []Problem
	}{
		// server and events
		{
			name: "listen not host:port",
			doc:  sections{server: "server: {listen: localhost, externalURL: 'http://x'}\n"},
			want: []Problem{{"server.listen", `invalid address "localhost": want host:port, such as "127.0.0.1:8080"`}},
		}, {
			name: "listen port out of range",
			doc:  sections{server: "server: {listen: 'localhost:70000'}\n"},
			want: []Problem{{"server.listen", `invalid port "70000": want a number 0..65535`}},
		}, {
			name: "externalURL not http",
			doc:  sections{server: "server: {externalURL: 'ftp://host/'}\n"},
			want: []Problem{{"server.externalURL", `want an http or https URL, got scheme "ftp"`}},
		}, {
			name: "externalURL without host",
			doc:  sections{server: "server: {externalURL: 'http:///path'}\n"},
			want: []Problem{{"server.externalURL", "want an absolute URL with a host"}},
		}, {
			name: "sink relative",
			doc:  sections{events: "events: {sink: /events}\n"},
			want: []Problem{{"events.sink", `want an http or https URL, got scheme ""`}},
		}, {
			name: "sink unparsable",
			doc:  sections{events: "events: {sink: 'http://[::1'}\n"},
			want: []Problem{{"events.sink", `invalid URL: missing ']' in host`}},
		}, {
			name: "sink https ok",
			doc:  sections{events: "events: {sink: 'https://events.example.com/'}\n"},
		}, {
			name: "cdevents sinks",
			doc:  sections{events: "events: {cdevents: ['https://cd.example.com/', 'ftp://x/', 'https://cd.example.com/']}\n"},
			want: []Problem{
				{"events.cdevents[1]", `want an http or https URL, got scheme "ftp"`},
				{"events.cdevents[2]", `"https://cd.example.com/" is listed twice`},
			},
		},
		// receivers
		{
			name: "no receivers",
			doc:  sections{receivers: "receivers: []\n"},
			want: []Problem{{"receivers", "at least one receiver is required"}},
		}, {
			name: "receiver name and type required",
			doc:  sections{receivers: "receivers: [{insecure: true}]\n"},
			want: []Problem{
				{"receivers[0].name", "required"},
				{"receivers[0].type", "required; want one of " + strings.Join(ReceiverTypes, ", ")},
			},
		}, {
			name: "receiver name not a DNS label, type unknown",
			doc:  sections{receivers: "receivers: [{name: My_Hook, type: sns, insecure: true}]\n"},
			want: []Problem{
				{"receivers[0].name", `invalid receiver name "My_Hook": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"receivers[0].type", `unknown receiver type "sns"; want one of ` + strings.Join(ReceiverTypes, ", ")},
			},
		}, {
			name: "gar needs oidc, not a secret",
			doc:  sections{receivers: "receivers: [{name: g, type: gar, secret: {env: FLOTILLA_TEST_TOKEN}}]\n"},
			want: []Problem{
				{"receivers[0].secret", "gar receivers authenticate with oidc, not a secret"},
				{"receivers[0].oidc", "required unless insecure: true: set oidc.audience to the push subscription's audience"},
			},
		}, {
			name: "gar oidc fields",
			doc:  sections{receivers: "receivers: [{name: g, type: gar, oidc: {issuer: 'ftp://x', jwksURL: 'https://k/', jwksFile: missing.json}}]\n"},
			want: []Problem{
				{"receivers[0].oidc.audience", "required: the audience set on the Pub/Sub push subscription"},
				{"receivers[0].oidc", "set at most one of jwksURL and jwksFile"},
				{"receivers[0].oidc.issuer", `want an http or https URL, got scheme "ftp"`},
				{"receivers[0].oidc.jwksFile", "stat " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
			},
		}, {
			name: "workers out of range",
			doc:  sections{server: "server: {workers: 2000}\n"},
			want: []Problem{{"server.workers", "2000 is out of range: want 1 to 1024"}},
		}, {
			name: "journal bounds",
			doc:  sections{server: "server: {retention: -1h, dedupeWindow: -10s, dedupeMaxEvents: -1}\n"},
			want: []Problem{
				{"server.retention", "-1h0m0s is negative: want a duration, or 0s to keep every event"},
				{"server.dedupeWindow", "-10s is negative: want a duration such as 24h"},
				{"server.dedupeMaxEvents", "-1 is negative: want a number of events, or 0 for no bound"},
			},
		}, {
			name: "retention shorter than the dedupe window",
			doc:  sections{server: "server: {retention: 2h}\n"},
			want: []Problem{{"server.retention", "2h0m0s is shorter than server.dedupeWindow (24h0m0s): the ids of deleted events would be forgotten at a restart; want at least the window, or 0s"}},
		}, {
			name: "named API tokens",
			doc:  sections{server: "server: {apiToken: {env: FLOTILLA_TEST_TOKEN}, apiTokens: [{name: default, secret: {env: FLOTILLA_TEST_TOKEN}}, {name: Bob}, {name: carol, secret: {env: FLOTILLA_EMPTY}}]}\n"},
			want: []Problem{
				{"server.apiTokens[0].name", `duplicate token name "default" (first used by server.apiToken)`},
				{"server.apiTokens[1].name", `invalid token name "Bob": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"server.apiTokens[1].secret", "required: where the token comes from (env or file)"},
				{"server.apiTokens[2].secret.env", `environment variable "FLOTILLA_EMPTY" is not set or is empty`},
			},
		}, {
			name: "scale-out bus",
			doc:  sections{server: "server: {dedupeMaxEvents: 10, bus: {url: 'http://nats:4222,nats://', stream: 'a.b', replicas: 2, partitions: 0, credentialsFile: missing.creds, tls: {certFile: c1.kubeconfig}}}\n"},
			want: []Problem{
				{"server.bus.url", `"http://nats:4222" is not a nats:// or tls:// URL with a host`},
				{"server.bus.url", `"nats://" is not a nats:// or tls:// URL with a host`},
				{"server.bus.stream", `"a.b": want 1-32 letters, digits, '-' or '_'`},
				{"server.bus.replicas", "2: want 1, 3 or 5 (JetStream's replication factors)"},
				{"server.bus.credentialsFile", "stat " + filepath.Join(dir, "missing.creds") + ": no such file or directory"},
				{"server.bus.tls", "certFile and keyFile go together (mutual TLS), or neither"},
				{"server.dedupeMaxEvents", "bounds the embedded journal's ids; with server.bus the stream's de-duplication window (server.dedupeWindow) is the bound: remove it"},
			},
		}, {
			name: "registry credentials",
			doc:  sections{server: "registries: {dockerConfigFiles: [missing.json, not-json, no-auths, '', good.json, good.json], providers: [aws, ibm, aws]}\n"},
			want: []Problem{
				{"registries.dockerConfigFiles[0]", "open " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
				{"registries.dockerConfigFiles[1]", filepath.Join(dir, "not-json") + ` is not a Docker config (JSON with "auths"): invalid character 'a' looking for beginning of value`},
				{"registries.dockerConfigFiles[2]", filepath.Join(dir, "no-auths") + ` has no "auths": want {"auths": {"registry.example.com": {"auth": "<base64 of user:password>"}}}, as kubectl create secret docker-registry writes it`},
				{"registries.dockerConfigFiles[3]", "empty: want the path of a Docker config file"},
				{"registries.dockerConfigFiles[5]", `"` + filepath.Join(dir, "good.json") + `" is listed twice`},
				{"registries.providers[1]", `unknown registry provider "ibm"; want one of aws, azure, gcp`},
				{"registries.providers[2]", `"aws" is listed twice`},
			},
		}, {
			name: "fleet rollouts",
			doc:  sections{server: "server: {fleetRollouts: {namespace: Flotilla, kubeconfig: missing.kubeconfig}}\n"},
			want: []Problem{
				{"server.fleetRollouts.namespace", `invalid namespace name "Flotilla": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"server.fleetRollouts.kubeconfig", "stat " + filepath.Join(dir, "missing.kubeconfig") + ": no such file or directory"},
			},
		}, {
			name: "fleet rollouts in cluster",
			doc:  sections{server: "server: {fleetRollouts: {namespace: flotilla}}\n"},
		}, {
			name: "scale-out bus, defaults",
			doc:  sections{server: "server: {bus: {url: 'nats://n1:4222, tls://n2:4222'}}\n"},
		}, {
			name: "journal bounds off",
			doc:  sections{server: "server: {retention: 0s, dedupeMaxEvents: 0}\n"},
		}, {
			name: "gar oidc ok, defaults",
			doc:  sections{receivers: "receivers: [{name: g, type: gar, oidc: {audience: flotilla}}]\n"},
		}, {
			// Air-gapped installs: the keys in a file, no URL (was refused: jwksURL required).
			name: "gar oidc with a jwks file and no url",
			doc:  sections{receivers: "receivers: [{name: g, type: gar, oidc: {audience: flotilla, jwksFile: c1.kubeconfig}}]\n"},
		}, {
			// Was checked only when serve started, after every other problem was reported.
			name: "no flagger receiver",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, insecure: true}, {name: other, type: flagger-not}]\n"},
			want: []Problem{
				{"receivers", "a receiver of type flagger is required: canaries report their progress to it"},
				{"receivers[1].type", `unknown receiver type "flagger-not"; want one of ` + strings.Join(ReceiverTypes, ", ")},
				{"receivers[1].secret", "required unless insecure: true, since a receiver without a secret accepts anyone's requests"},
			},
		}, {
			name: "oidc on another type, insecure gar with oidc",
			doc: sections{receivers: "receivers: [{name: a, type: github, insecure: true, oidc: {audience: x}}, " +
				"{name: b, type: gar, insecure: true, oidc: {audience: x}}]\n"},
			want: []Problem{
				{"receivers[0].oidc", "only gar receivers authenticate with OIDC"},
				{"receivers[1].insecure", "cannot be true when oidc is set; remove one of them"},
			},
		}, {
			name: "header and registry where they do not belong",
			doc: sections{receivers: "receivers: [{name: a, type: github, insecure: true, header: X-Token, registry: r.example.com}, " +
				"{name: b, type: harbor, insecure: true, header: 'bad header'}, {name: c, type: nexus, insecure: true}, " +
				"{name: d, type: nexus, insecure: true, registry: 'r.example.com/path'}]\n"},
			want: []Problem{
				{"receivers[0].header", "only distribution, harbor, acr, ecr, cloudevents receivers send a configured header"},
				{"receivers[0].registry", "only nexus receivers take a registry: the other senders name it"},
				{"receivers[1].header", `"bad header" is not a valid HTTP header name`},
				{"receivers[2].registry", "required for nexus receivers: the host[:port] of the Docker connector, since Nexus does not name it"},
				{"receivers[3].registry", `"r.example.com/path" is not host[:port]`},
			},
		}, {
			name: "rate limit",
			doc:  sections{receivers: "receivers: [{name: a, type: github, insecure: true, rateLimit: {perSecond: 0, burst: -1}}]\n"},
			want: []Problem{
				{"receivers[0].rateLimit.perSecond", "must be > 0"},
				{"receivers[0].rateLimit.burst", "must be >= 1"},
			},
		}, {
			name: "rate limit burst defaults to twice the rate",
			doc:  sections{receivers: "receivers: [{name: a, type: acr, insecure: true, header: X-Acr-Token, rateLimit: {perSecond: 10}}]\n"},
		}, {
			name: "api token from a missing variable",
			doc:  sections{server: "server: {apiToken: {env: FLOTILLA_NO_SUCH_TOKEN}}\n"},
			want: []Problem{{"server.apiToken.env", `environment variable "FLOTILLA_NO_SUCH_TOKEN" is not set or is empty`}},
		}, {
			name: "validation items",
			doc: sections{applications: withApp(`    validation:
      validationPeriod: 500ms
      items:
        - {}
        - manual: {statusAfterDeadline: maybe}
        - manual: {}
        - labelWatch: {}
        - labelWatch: {podInvalidationLabels: {ok: x}}
        - promQL: {prometheusURL: 'ftp://prom'}
        - {manual: {}, promQL: {query: up}}
`)},
			want: []Problem{
				{"applications[0].validation.validationPeriod", "must be at least 1s, got 500ms"},
				{"applications[0].validation.items[0]", "set exactly one of manual, labelWatch and promQL"},
				{"applications[0].validation.items[1].manual.statusAfterDeadline", `unknown status "maybe"; want one of none, valid, invalid`},
				{"applications[0].validation.items[2].manual", "only one manual validation per application"},
				{"applications[0].validation.items[3].labelWatch", "set deploymentInvalidationLabels or podInvalidationLabels"},
				{"applications[0].validation.items[5].promQL.query", "required: a PromQL query that returns 1 (true) for a healthy canary"},
				{"applications[0].validation.items[5].promQL.prometheusURL", `want an http or https URL, got scheme "ftp"`},
				{"applications[0].validation.items[6]", "set exactly one of manual, labelWatch and promQL"},
			},
		}, {
			name: "validation ok",
			doc: sections{applications: withApp(`    validation:
      items:
        - manual: {statusAfterDeadline: valid}
        - labelWatch: {deploymentInvalidationLabels: {validation: failed}}
        - promQL: {query: 'sum(rate(http_errors[{{ interval }}])) < bool 1'}
`)},
		}, {
			name: "receiver name too long",
			doc:  sections{receivers: "receivers: [{name: " + strings.Repeat("a", 64) + ", type: github, insecure: true}]\n"},
			want: []Problem{{"receivers[0].name", `invalid receiver name "` + strings.Repeat("a", 64) + `": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`}},
		}, {
			name: "duplicate receiver names",
			doc: sections{receivers: `
receivers:
  - {name: hook, type: github, insecure: true}
  - {name: other, type: github, insecure: true}
  - {name: hook, type: flagger, insecure: true}
`},
			want: []Problem{{"receivers[2].name", `duplicate receiver name "hook" (first used by receivers[0])`}},
		}, {
			name: "receiver without secret",
			doc:  sections{receivers: "receivers: [{name: hook, type: github}]\n"},
			want: []Problem{{"receivers[0].secret", "required unless insecure: true, since a receiver without a secret accepts anyone's requests"}},
		}, {
			name: "receiver insecure with secret",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, insecure: true, secret: {env: FLOTILLA_TEST_TOKEN}}]\n"},
			want: []Problem{{"receivers[0].insecure", "cannot be true when a secret is set; remove one of them"}},
		}, {
			name: "secret with env and file",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {env: FLOTILLA_TEST_TOKEN, file: token}}]\n"},
			want: []Problem{{"receivers[0].secret", "set exactly one of env and file"}},
		}, {
			name: "secret with neither env nor file",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {}}]\n"},
			want: []Problem{{"receivers[0].secret", "set exactly one of env and file"}},
		}, {
			name: "secret env unset",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {env: FLOTILLA_NO_SUCH_VAR}}]\n"},
			want: []Problem{{"receivers[0].secret.env", `environment variable "FLOTILLA_NO_SUCH_VAR" is not set or is empty`}},
		}, {
			name: "secret env empty",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {env: FLOTILLA_EMPTY}}]\n"},
			want: []Problem{{"receivers[0].secret.env", `environment variable "FLOTILLA_EMPTY" is not set or is empty`}},
		}, {
			name: "secret file missing",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {file: secrets/nope}}]\n"},
			want: []Problem{{"receivers[0].secret.file", "reading secret file: open " + filepath.Join(dir, "secrets", "nope") + ": no such file or directory"}},
		}, {
			name: "secret file only a newline",
			doc:  sections{receivers: "receivers: [{name: hook, type: github, secret: {file: empty-secret}}]\n"},
			want: []Problem{{"receivers[0].secret.file", `secret file "` + filepath.Join(dir, "empty-secret") + `" is empty`}},
		},
		// fleet
		{
			name: "unknown executor",
			doc:  sections{fleet: "fleet: {executor: argo, clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{{"fleet.executor", `unknown executor "argo"; want one of embedded, tekton`}},
		}, {
			name: "wave selectors and policies",
			doc: sections{fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}, {name: c2, kubeconfig: c1.kubeconfig}], " +
				"wavePolicy: {maxParallel: 0, maxFailures: '120%'}, waves: [{selector: {matchLabels: {tier: canary}}, maxParallel: '50%'}, " +
				"{selector: {matchExpressions: [{key: tier, operator: Sometimes}]}}, {selector: {matchLabels: {tier: canary}}, maxFailures: x}, {clusters: [c2]}]}\n"},
			want: []Problem{
				{"fleet.wavePolicy.maxParallel", `0 is out of range: want at least 1, or a percentage such as "25%"`},
				{"fleet.wavePolicy.maxFailures", "120% is out of range: want 0% to 100%"},
				{"fleet.waves[2].maxFailures", `invalid value "x": want a count such as 2 or a percentage such as "25%"`},
				{"fleet.waves[1].selector", `"Sometimes" is not a valid label selector operator`},
				{"fleet.waves[2].selector", "selects no cluster that an earlier wave or a wave's clusters list does not have already (tier=canary)"},
			},
		}, {
			name: "bake time and its alias",
			doc: sections{fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], wavePolicy: {bakeTime: 1m, requiredSoakTime: 2m}, " +
				"waves: [{clusters: [c1], bakeTime: -1s}]}\n"},
			want: []Problem{
				{"fleet.wavePolicy.requiredSoakTime", "is an alias of bakeTime: set one of them"},
				{"fleet.waves[0].bakeTime", "-1s is negative"},
			},
		}, {
			name: "freeze windows",
			doc: sections{
				fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1], freezeWindows: [{name: nights, schedule: '61 * * * *', duration: 1h}]}], " +
					"freezeWindows: [{name: bf, rrule: 'FREQ=YEARLY', duration: 1h, timeZone: Mars/Olympus}, {name: bf, schedule: '@weekly', rrule: 'FREQ=DAILY', duration: 1h}, {name: ok, schedule: '@weekly'}]}\n",
				applications: withApp("    freezeWindows: [{name: weekends, rrule: 'FREQ=WEEKLY;BYDAY=SA', duration: 48h, timeZone: Europe/Berlin}]\n"),
			},
			want: []Problem{
				{"fleet.freezeWindows[0]", `time zone "Mars/Olympus": unknown time zone Mars/Olympus`},
				{"fleet.freezeWindows[1].name", `duplicate freeze window name "bf" (first used by fleet.freezeWindows[0])`},
				{"fleet.freezeWindows[1]", "set exactly one of schedule (cron) and rrule"},
				{"fleet.freezeWindows[2]", "duration 0s: want a positive duration"},
				{"fleet.waves[0].freezeWindows[0]", `schedule "61 * * * *": end of range (61) above maximum (59): 61`},
			},
		}, {
			name: "semver constraint",
			doc:  sections{applications: withApp("    semver: '>=>1'\n")},
			want: []Problem{{"applications[0].semver", `constraint ">=>1": improper constraint: >=>1`}},
		}, {
			name: "tag filter",
			doc:  sections{applications: withApp("    tagFilter: {pattern: '^release-(?P<version>[0-9.]+$', extract: version}\n")},
			want: []Problem{{"applications[0].tagFilter.pattern", "error parsing regexp: missing closing ): `^release-(?P<version>[0-9.]+$`"}},
		}, {
			name: "deny tags",
			doc:  sections{applications: withApp("    denyTags: ['.*-debug', '', '1.(']\n")},
			want: []Problem{
				{"applications[0].denyTags[1]", "empty: a regular expression of tags never to roll out"},
				{"applications[0].denyTags[2]", "error parsing regexp: missing closing ): `1.(`"},
			},
		}, {
			name: "poll intervals",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}], poll: {interval: -1s}}\n",
				applications: withApp("    poll: {interval: 500ms}\n"),
			},
			want: []Problem{
				{"fleet.poll.interval", "-1s: want 0s (off) or at least 1s"},
				{"applications[0].poll.interval", "500ms: want 0s (off) or at least 1s"},
			},
		}, {
			name: "reconcile interval and drift policy",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}], reconcile: {interval: 100ms}}\n",
				applications: withApp("    driftPolicy: heal\n"),
			},
			want: []Problem{
				{"fleet.reconcile.interval", "100ms: want 0s (off) or at least 1s"},
				{"applications[0].driftPolicy", `unknown driftPolicy "heal"; want one of report, revert`},
			},
		}, {
			name: "a git application's drift may be reverted",
			doc:  sections{applications: withApp("    driftPolicy: revert\n    source: {git: {url: https://git.example.com/d.git, paths: [a]}}\n")},
			want: []Problem{
				{"applications[0].image", "set either image or source.git: an application follows an image repository or a git repository"},
			},
		}, {
			name: "reconcile off, drift reverted",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}], reconcile: {interval: 0s}}\n",
				applications: withApp("    driftPolicy: revert\n"),
			},
		}, {
			name: "poll off and on",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}], poll: {interval: 0s}}\n",
				applications: withApp("    poll: {interval: 2s, disabled: false}\n"),
			},
		}, {
			name: "git source: image too, and fields of image applications",
			doc:  sections{applications: withApp("    semver: '^1'\n    denyTags: [x]\n    source: {git: {url: https://git.example.com/d.git, paths: [a]}}\n")},
			want: []Problem{
				{"applications[0].image", "set either image or source.git: an application follows an image repository or a git repository"},
			},
		}, {
			name: "git source: what it needs",
			doc: sections{applications: `
applications:
  - name: podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    semver: '^1'
    gitops: {url: https://git.example.com/d.git, paths: [a.yaml]}
    source: {git: {tags: 'v(', render: jsonnet, paths: ['', ../x, /etc], allowedImages: ['', 'a(']}}
`},
			want: []Problem{
				{"applications[0].source.git.url", "required: the deployments repository (https://, ssh://, git@host:path, file:// or a path)"},
				{"applications[0].gitops", "a git application's repository is its source already: gitops writes images into a repository, for image applications"},
				{"applications[0].semver", "applies to image tags: a git application rolls out every commit that changes what it tracks"},
				{"applications[0].source.git.tags", "error parsing regexp: missing closing ): `v(`"},
				{"applications[0].source.git.render", `unknown render "jsonnet"; want one of manifests, kustomize, helm`},
				{"applications[0].source.git.allowedImages[0]", "empty: a regular expression of image repositories the manifests may run"},
				{"applications[0].source.git.allowedImages[1]", "error parsing regexp: missing closing ): `a(`"},
				{"applications[0].source.git.paths[0]", "empty: want a path inside the repository"},
				{"applications[0].source.git.paths[1]", `"../x": want a path inside the repository`},
				{"applications[0].source.git.paths[2]", `"/etc": want a path inside the repository`},
			},
		}, {
			name: "git source: helm",
			doc: sections{applications: `
applications:
  - name: podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    source: {git: {url: /srv/d.git, render: helm, helm: {valuesFile: ../v.yaml, releaseName: Web}}}
  - name: web
    workload: {name: web}
    service: {port: 9898}
    source: {git: {url: /srv/d.git, render: kustomize, paths: [a], helm: {chart: c}}}
  - name: api
    workload: {name: api}
    service: {port: 9898}
    source: {git: {url: /srv/d.git, render: helm}}
  - name: empty
    workload: {name: empty}
    service: {port: 9898}
    source: {}
`},
			want: []Problem{
				{"applications[0].source.git.helm.chart", "required: the chart's directory in the repository"},
				{"applications[0].source.git.helm.valuesFile", `"../v.yaml": want a path inside the repository`},
				{"applications[0].source.git.helm.releaseName", `invalid release name "Web": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"applications[1].source.git.helm", `only for render helm (render is "kustomize")`},
				{"applications[2].source.git.helm", "required by render helm: the chart directory and its values"},
				{"applications[3].source.git", "required: the git repository the application follows (or drop source and set image)"},
			},
		}, {
			name: "tag filter extract without a group",
			doc:  sections{applications: withApp("    tagFilter: {pattern: '^release-(?P<version>[0-9.]+)$', extract: version}\n")},
			want: []Problem{{"applications[0].tagFilter.extract", `"version" names no group of the pattern: want a template such as "$version" (groups: [version])`}},
		}, {
			name: "signature authorities",
			doc: sections{applications: withApp("    verify: {ignoreTlog: true, signatures: [{name: a, key: {file: empty-secret}}, {name: a, key: {env: FLOTILLA_TEST_TOKEN}}, " +
				"{name: b}, {name: c, keyless: {subject: '('}}, {keyless: {issuer: x, subject: y, trustedRoot: {env: FLOTILLA_TEST_TOKEN}}}]}\n")},
			want: []Problem{
				{"applications[0].verify.signatures[0].key.file", `secret file "` + filepath.Join(dir, "empty-secret") + `" is empty`},
				{"applications[0].verify.signatures[1].name", `"a" is used twice`},
				{"applications[0].verify.signatures[1].key", "not a PEM public key (cosign.pub): PEM decoding failed"},
				{"applications[0].verify.signatures[2]", "set exactly one of key and keyless"},
				{"applications[0].verify.signatures[3].keyless.issuer", "required: the OIDC issuer of the signers' certificates"},
				{"applications[0].verify.signatures[3].keyless.subject", "error parsing regexp: missing closing ): `(`"},
				{"applications[0].verify.signatures[3].keyless.trustedRoot", "required: Sigstore's trusted_root.json, as a file"},
				{"applications[0].verify.signatures[4].name", "required: names the signer in messages"},
				{"applications[0].verify.signatures[4].keyless.trustedRoot", "not a trusted root: not JSON (Sigstore's trusted_root.json)"},
			},
		}, {
			// A key's signatures must be logged unless ignoreTlog: no
			// field accepted and ignored.
			name: "key signers' transparency log",
			doc: sections{applications: withApp("    verify: {signatures: [{name: a, key: {file: cosign.pub}}, " +
				"{name: b, key: {file: cosign.pub}, trustedRoot: {file: ca-root.json}}, " +
				"{name: c, keyless: {issuer: x, subject: y, trustedRoot: {file: ca-root.json}}, trustedRoot: {file: log-root.json}}, " +
				"{name: d, key: {file: cosign.pub}, trustedRoot: {file: not-json}}]}\n" +
				"  - name: other\n    image: registry.example.com/demo/other\n    workload: {name: other}\n    service: {port: 9898}\n" +
				"    verify: {ignoreTlog: true, signatures: [{name: e, keyless: {issuer: x, subject: y, trustedRoot: {file: ca-root.json}}}]}\n" +
				"  - name: third\n    image: registry.example.com/demo/third\n    workload: {name: third}\n    service: {port: 9898}\n" +
				"    verify: {ignoreTlog: true, signatures: [{name: f, key: {file: cosign.pub}, trustedRoot: {file: log-root.json}}]}\n")},
			want: []Problem{
				{"applications[0].verify.signatures[0].trustedRoot", "required with key: Sigstore's trusted_root.json naming the Rekor log its signatures must be in, as a file (or verify.ignoreTlog: true, weaker)"},
				{"applications[0].verify.signatures[1].trustedRoot", "names no Rekor log (tlogs): the key's signatures could never be found logged"},
				{"applications[0].verify.signatures[2].trustedRoot", "only with key: a keyless identity's root is keyless.trustedRoot"},
				{"applications[0].verify.signatures[3].trustedRoot", "not a trusted root: not JSON (Sigstore's trusted_root.json)"},
				{"applications[1].verify.ignoreTlog", "concerns key signers, and there is none"},
				{"applications[2].verify.signatures[0].trustedRoot", "unused: verify.ignoreTlog is true (remove one)"},
			},
		}, {
			name: "a key signer with its log, and one ignoring the log",
			doc: sections{applications: withApp("    verify: {signatures: [{name: a, key: {file: cosign.pub}, trustedRoot: {file: log-root.json}}]}\n" +
				"  - name: other\n    image: registry.example.com/demo/other\n    workload: {name: other}\n    service: {port: 9898}\n" +
				"    verify: {ignoreTlog: true, signatures: [{name: b, key: {file: cosign.pub}}]}\n")},
		}, {
			name: "required attestations",
			doc: sections{applications: withApp("    verify: {signatures: [{name: a, key: {file: cosign.pub}, trustedRoot: {file: log-root.json}}], " +
				"attestations: [{predicateType: 'https://slsa.dev/provenance/v1'}, {}, {predicateType: slsaprovenance1}, {predicateType: 'https://slsa.dev/provenance/v1'}]}\n")},
			want: []Problem{
				{"applications[0].verify.attestations[1].predicateType", "required: the in-toto predicate type the attestation must have (a URI)"},
				{"applications[0].verify.attestations[2].predicateType", `"slsaprovenance1" is not a URI: want the predicate type itself (cosign's slsaprovenance1 is https://slsa.dev/provenance/v1)`},
				{"applications[0].verify.attestations[3].predicateType", `"https://slsa.dev/provenance/v1" is required twice`},
			},
		}, {
			name: "semver constraint with track Newest",
			doc:  sections{applications: withApp("    track: Newest\n    semver: '>=1'\n")},
			want: []Problem{{"applications[0].semver", "track Newest follows the newest tag whatever its version: a semver constraint needs a semantic track"}},
		}, {
			name: "application cluster selector",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {region: eu}}], waves: [{clusters: [c1]}]}\n",
				applications: withApp("    clusterSelector: {matchLabels: {region: us}}\n"),
			},
			want: []Problem{{"applications[0].clusterSelector", `application "podinfo" selects no cluster of the fleet (region=us): label clusters in fleet.clusters[].labels`}},
		}, {
			name: "application cluster selector matches",
			doc: sections{
				fleet:        "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {region: eu}}], waves: [{clusters: [c1]}]}\n",
				applications: withApp("    clusterSelector: {matchExpressions: [{key: region, operator: In, values: [eu, us]}]}\n"),
			},
		}, {
			name: "tekton executor without its settings",
			doc:  sections{fleet: "fleet: {executor: tekton, clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{{"fleet.tekton", "required with executor tekton: the cluster (or kubeconfig) that runs Tekton"}},
		}, {
			name: "tekton settings wrong",
			doc: sections{fleet: "fleet: {executor: tekton, tekton: {cluster: c9, kubeconfig: c1.kubeconfig, namespace: Flotilla}, " +
				"clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{
				{"fleet.tekton", "set exactly one of cluster (a fleet cluster) and kubeconfig"},
				{"fleet.tekton.namespace", `invalid namespace name "Flotilla": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
			},
		}, {
			name: "tekton on an unknown cluster, and without the executor",
			doc: sections{fleet: "fleet: {tekton: {cluster: c9}, " +
				"clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{
				{"fleet.tekton", "only the tekton executor uses it; set executor: tekton or remove it"},
				{"fleet.tekton.cluster", `no fleet cluster "c9"`},
			},
		}, {
			name: "tekton labels invalid",
			doc: sections{fleet: "fleet: {executor: tekton, tekton: {cluster: c1, labels: {'team/': x, cost-center: 'a b'}}, " +
				"clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{
				{`fleet.tekton.labels["cost-center"]`, `invalid label value "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
				{`fleet.tekton.labels["team/"]`, "invalid label key: name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
			},
		}, {
			name: "tekton pod template invalid",
			doc: sections{fleet: `
fleet:
  executor: tekton
  tekton:
    cluster: c1
    podTemplate:
      nodeSelector: {'pool/': ci}
      tolerations:
        - {operator: Equal, value: x}
        - {key: dedicated, operator: Exists, value: ci, effect: NoSchedual}
        - {key: dedicated, operator: exists, effect: NoSchedule, tolerationSeconds: 60}
      imagePullSecrets: [{name: Regcred}, {}]
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
`},
			want: []Problem{
				{`fleet.tekton.podTemplate.nodeSelector["pool/"]`, "invalid label key: name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
				{"fleet.tekton.podTemplate.tolerations[0].operator", "a toleration without a key tolerates every taint: want operator Exists"},
				{"fleet.tekton.podTemplate.tolerations[1].value", "must be empty with operator Exists"},
				{"fleet.tekton.podTemplate.tolerations[1].effect", `unknown effect "NoSchedual"; want NoSchedule, PreferNoSchedule or NoExecute`},
				{"fleet.tekton.podTemplate.tolerations[2].operator", `unknown operator "exists"; want Equal or Exists`},
				{"fleet.tekton.podTemplate.tolerations[2].tolerationSeconds", "only with effect NoExecute"},
				{"fleet.tekton.podTemplate.imagePullSecrets[0].name", `invalid name "Regcred": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
				{"fleet.tekton.podTemplate.imagePullSecrets[1].name", "required"},
			},
		}, {
			name: "tekton ok",
			doc: sections{fleet: "fleet: {executor: tekton, tekton: {cluster: c1, labels: {simfail: on-host, team.example.com/owner: shop}}, " +
				"clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"},
		}, {
			name: "gitops wrong",
			doc: sections{applications: withApp(`    gitops:
      paths: ['/etc/passwd', '../x', '']
      edit: sed
      password: {env: FLOTILLA_NO_SUCH_PASSWORD}
      token: {env: FLOTILLA_TEST_TOKEN}
`)},
			want: []Problem{
				{"applications[0].gitops.url", "required: the deployments repository (https://, ssh://, git@host:path, file:// or a path)"},
				{"applications[0].gitops.paths[0]", `"/etc/passwd": want a path inside the repository`},
				{"applications[0].gitops.paths[1]", `"../x": want a path inside the repository`},
				{"applications[0].gitops.paths[2]", `"": want a path inside the repository`},
				{"applications[0].gitops.edit", `unknown edit "sed"; want one of kustomize, helm, manifest`},
				{"applications[0].gitops", "set at most one of password and token"},
				{"applications[0].gitops.password.env", `environment variable "FLOTILLA_NO_SUCH_PASSWORD" is not set or is empty`},
			},
		}, {
			name: "gitops ok",
			doc: sections{applications: withApp(`    gitops:
      url: https://git.example.com/shop/deployments.git
      paths: ['clusters/{cluster}/podinfo/values.yaml']
      edit: helm
      options: {tagValue: image.tag}
      token: {env: FLOTILLA_TEST_TOKEN}
`)},
		}, {
			name: "pull requests ok",
			doc: sections{applications: withApp(`    gitops:
      url: https://git.example.com/shop/deployments.git
      paths: ['clusters/{cluster}/podinfo/values.yaml']
      edit: helm
      token: {env: FLOTILLA_TEST_TOKEN}
      mode: pullRequest
      pullRequest: {host: gitea, autoMerge: true, labels: [flotilla], reviewers: [alice], mergeDeadline: 2h, pollInterval: 30s, mergeRetryFor: 10m}
`)},
		}, {
			name: "pull requests wrong",
			doc: sections{applications: withApp(`    gitops:
      url: file:///srv/deployments.git
      paths: ['podinfo/values.yaml']
      mode: pullRequest
      pullRequest: {host: bitbucket, mergeMethod: fast-forward, revert: never, labels: ['', 'a,b'], mergeDeadline: 30s, pollInterval: 1s, mergeRetryFor: 1m}
`)},
			want: []Problem{
				{"applications[0].gitops.pullRequest.host", "bitbucket has no pull request client in flotilla; use mode commit"},
				{"applications[0].gitops.pullRequest.apiURL", "required: the url names no host (file:// or a local path), so set apiURL and repository"},
				{"applications[0].gitops.pullRequest.repository", `"": want owner/name on the host (GitLab: the project's full path)`},
				{"applications[0].gitops.pullRequest.token", "required: an API token of the host (or gitops.token, which is used when this is not set)"},
				{"applications[0].gitops.pullRequest.mergeMethod", `unknown merge method "fast-forward"; want one of merge, squash, rebase`},
				{"applications[0].gitops.pullRequest.revert", `unknown revert "never"; want one of pullRequest, commit`},
				{"applications[0].gitops.pullRequest.mergeDeadline", "30s: want 1m0s to 720h0m0s"},
				{"applications[0].gitops.pullRequest.pollInterval", "1s: want 10s up to the merge deadline (30s)"},
				{"applications[0].gitops.pullRequest.mergeRetryFor", "1m0s: want 0s up to the merge deadline (30s)"},
				{"applications[0].gitops.pullRequest.labels[0]", `"": want a non-empty name without commas`},
				{"applications[0].gitops.pullRequest.labels[1]", `"a,b": want a non-empty name without commas`},
				{"applications[0].gitops.paths[0]", `"podinfo/values.yaml": mode pullRequest opens one pull request per wave, so each cluster needs its own file: put {cluster} in the path`},
			},
		}, {
			name: "pull request settings without the mode",
			doc: sections{applications: withApp(`    gitops:
      url: https://git.example.com/shop/deployments.git
      paths: ['clusters/{cluster}/values.yaml']
      mode: push
      pullRequest: {host: github}
`)},
			want: []Problem{
				{"applications[0].gitops.mode", `unknown mode "push"; want one of commit, pullRequest`},
				{"applications[0].gitops.pullRequest", `only for mode pullRequest (mode is "push")`},
			},
		}, {
			name: "no fleet at all",
			doc:  sections{fleet: "-"},
			want: []Problem{
				{"fleet.clusters", "at least one cluster is required"},
				{"fleet.waves", "at least one wave is required"},
			},
		}, {
			name: "clusters without waves",
			doc:  sections{fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}]}\n"},
			want: []Problem{{"fleet.waves", "at least one wave is required"}},
		}, {
			name: "cluster name and kubeconfig required",
			doc:  sections{fleet: "fleet: {clusters: [{}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{
				{"fleet.clusters[0].name", "required"},
				{"fleet.clusters[0].kubeconfig", "required: the path of the cluster's kubeconfig"},
				{"fleet.waves[0].clusters[0]", `unknown cluster "c1"`},
			},
		}, {
			name: "cluster name invalid, kubeconfig missing",
			doc:  sections{fleet: "fleet: {clusters: [{name: C1, kubeconfig: nope/kubeconfig}], waves: [{clusters: [C1]}]}\n"},
			want: []Problem{
				{"fleet.clusters[0].name", `invalid cluster name "C1": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"fleet.clusters[0].kubeconfig", `file "` + filepath.Join(dir, "nope", "kubeconfig") + `" does not exist`},
			},
		}, {
			name: "kubeconfig is a directory",
			doc:  sections{fleet: "fleet: {clusters: [{name: c1, kubeconfig: kubedir}], waves: [{clusters: [c1]}]}\n"},
			want: []Problem{{"fleet.clusters[0].kubeconfig", `"` + filepath.Join(dir, "kubedir") + `" is a directory; want a kubeconfig file`}},
		}, {
			name: "duplicate cluster names",
			doc: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c1, kubeconfig: c2.kubeconfig}
  waves: [{clusters: [c1]}]
`},
			want: []Problem{{"fleet.clusters[1].name", `duplicate cluster name "c1" (first used by fleet.clusters[0])`}},
		}, {
			name: "invalid labels",
			doc: sections{fleet: `
fleet:
  clusters:
    - name: c1
      kubeconfig: c1.kubeconfig
      labels: {"-bad": ok, good: "not ok!", "example.com/zone": eu-1}
  waves: [{clusters: [c1]}]
`},
			want: []Problem{
				{`fleet.clusters[0].labels["-bad"]`, "invalid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
				{`fleet.clusters[0].labels["good"]`, `invalid label value "not ok!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
			},
		}, {
			name: "empty wave, unknown cluster",
			doc: sections{fleet: `
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves:
    - clusters: [c1]
    - clusters: []
    - clusters: [c9]
`},
			want: []Problem{
				{"fleet.waves[1].clusters", "a wave needs at least one cluster, or a selector"},
				{"fleet.waves[2].clusters[0]", `unknown cluster "c9"`},
			},
		}, {
			name: "cluster in two waves, and twice in one",
			doc: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c2, kubeconfig: c2.kubeconfig}
  waves:
    - {name: first, clusters: [c1]}
    - {name: second, clusters: [c2, c1, c2]}
`},
			want: []Problem{
				{"fleet.waves[1].clusters[1]", `cluster "c1" is already in wave "first"; a cluster may be in only one wave`},
				{"fleet.waves[1].clusters[2]", `cluster "c2" is listed twice in this wave`},
			},
		}, {
			name: "cluster in no wave",
			doc: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c2, kubeconfig: c2.kubeconfig}
    - {name: c3, kubeconfig: c3.kubeconfig}
  waves: [{clusters: [c2]}]
`},
			want: []Problem{
				{"fleet.clusters[0]", `cluster "c1" is in no wave, so it would never receive rollouts; add it to one of fleet.waves`},
				{"fleet.clusters[2]", `cluster "c3" is in no wave, so it would never receive rollouts; add it to one of fleet.waves`},
			},
		}, {
			name: "wave names invalid and duplicate",
			doc: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c2, kubeconfig: c2.kubeconfig}
    - {name: c3, kubeconfig: c3.kubeconfig}
  waves:
    - {name: Canary, clusters: [c1]}
    - {clusters: [c2]}
    - {name: wave-2, clusters: [c3]}
`},
			want: []Problem{
				{"fleet.waves[0].name", `invalid wave name "Canary": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{"fleet.waves[2].name", `duplicate wave name "wave-2" (first used by fleet.waves[1])`},
			},
		},
		// applications
		{
			name: "no applications",
			doc:  sections{applications: "applications: []\n"},
			want: []Problem{{"applications", "at least one application is required"}},
		}, {
			name: "application with nothing set",
			doc:  sections{applications: "applications: [{}]\n"},
			want: []Problem{
				{"applications[0].name", "required"},
				{"applications[0].image", `required; want a repository host[:port]/path without tag or digest, such as "registry.example.com/team/app"`},
				{"applications[0].workload.name", "required"},
				{"applications[0].service.port", "required: the port the workload serves on, 1..65535"},
			},
		}, {
			name: "application names invalid and duplicate",
			doc: sections{applications: app + `
  - name: podinfo
    image: registry.example.com/demo/other
    workload: {name: other}
    service: {port: 80}
  - name: pod.info
    image: registry.example.com/demo/third
    workload: {name: third}
    service: {port: 80}
`},
			want: []Problem{
				{"applications[1].name", `duplicate application name "podinfo" (first used by applications[0])`},
				{"applications[2].name", `invalid application name "pod.info": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
			},
		}, {
			name: "image with tag",
			doc:  sections{applications: strings.Replace(app, "demo/podinfo", "demo/podinfo:6.0.0", 1)},
			want: []Problem{{"applications[0].image", `"registry.example.com/demo/podinfo:6.0.0" includes a tag; want a repository host[:port]/path without tag or digest, such as "registry.example.com/team/app"`}},
		}, {
			name: "image with port and tag",
			doc:  sections{applications: strings.Replace(app, "registry.example.com/demo/podinfo", "127.0.0.1:5000/podinfo:1", 1)},
			want: []Problem{{"applications[0].image", `"127.0.0.1:5000/podinfo:1" includes a tag; want a repository host[:port]/path without tag or digest, such as "registry.example.com/team/app"`}},
		}, {
			name: "image with digest",
			doc:  sections{applications: strings.Replace(app, "demo/podinfo", "demo/podinfo@sha256:"+strings.Repeat("a", 64), 1)},
			want: []Problem{{"applications[0].image", `"registry.example.com/demo/podinfo@sha256:` + strings.Repeat("a", 64) + `" includes a digest; want a repository host[:port]/path without tag or digest, such as "registry.example.com/team/app"`}},
		}, {
			name: "image without registry",
			doc:  sections{applications: strings.Replace(app, "registry.example.com/demo/podinfo", "podinfo", 1)},
			want: []Problem{{"applications[0].image", `invalid repository "podinfo": strict validation requires the registry to be explicitly defined; want a repository host[:port]/path without tag or digest, such as "registry.example.com/team/app"`}},
		}, {
			name: "image with upper case",
			doc:  sections{applications: strings.Replace(app, "demo/podinfo", "Demo/PodInfo", 1)},
			want: []Problem{{"applications[0].image", "invalid repository \"registry.example.com/Demo/PodInfo\": repository can only contain the characters `abcdefghijklmnopqrstuvwxyz0123456789_-./`: Demo/PodInfo; want a repository host[:port]/path without tag or digest, such as \"registry.example.com/team/app\""}},
		}, {
			name: "image on localhost with port",
			doc:  sections{applications: strings.Replace(app, "registry.example.com/demo/podinfo", "localhost:5000/demo/podinfo", 1)},
		}, {
			name: "unknown track",
			doc:  sections{applications: withApp("    track: Minor\n")},
			want: []Problem{{"applications[0].track", `unknown track "Minor"; want one of PatchLevel, MinorVersion, MajorVersion, Newest`}},
		}, {
			name: "every track",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, track: PatchLevel, workload: {name: a}, service: {port: 1}}
  - {name: b, image: r.example.com/b, track: MinorVersion, workload: {name: b}, service: {port: 1}}
  - {name: c, image: r.example.com/c, track: MajorVersion, workload: {name: c}, service: {port: 1}}
  - {name: d, image: r.example.com/d, track: Newest, workload: {name: d}, service: {port: 65535}}
`},
		}, {
			name: "namespace invalid",
			doc:  sections{applications: withApp("    namespace: Demo\n")},
			want: []Problem{{"applications[0].namespace", `invalid namespace name "Demo": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`}},
		}, {
			name: "workload kind unsupported, name and container invalid",
			doc: sections{applications: `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {kind: StatefulSet, name: Pod_Info, container: app.main}
    service: {port: 9898}
`},
			want: []Problem{
				{"applications[0].workload.kind", `unknown workload kind "StatefulSet"; want one of Deployment, DaemonSet`},
				{"applications[0].workload.name", `invalid name "Pod_Info": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
				{"applications[0].workload.container", `invalid container name "app.main": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
			},
		}, {
			name: "service port out of range",
			doc:  sections{applications: strings.Replace(app, "port: 9898", "port: 65536", 1)},
			want: []Problem{{"applications[0].service.port", "port 65536 out of range 1..65535"}},
		}, {
			name: "service port negative",
			doc:  sections{applications: strings.Replace(app, "port: 9898", "port: -1", 1)},
			want: []Problem{{"applications[0].service.port", "port -1 out of range 1..65535"}},
		}, {
			name: "delivery out of bounds",
			doc:  sections{applications: withApp("    delivery: {strategy: canery, interval: 500ms, iterations: -1, threshold: -2, progressDeadline: -1m}\n")},
			want: []Problem{
				{"applications[0].delivery.strategy", `unknown strategy "canery"; want one of canary, abTesting, blueGreen`},
				{"applications[0].delivery.interval", "must be at least 1s, got 500ms"},
				{"applications[0].delivery.iterations", "must be at least 1, got -1"},
				{"applications[0].delivery.threshold", "must be at least 1, got -2"},
				{"applications[0].delivery.progressDeadline", "must be at least 1s, got -1m0s"},
			},
		}, {
			name: "delivery at its minimums",
			doc:  sections{applications: withApp("    delivery: {interval: 1s, iterations: 1, threshold: 1, progressDeadline: 1s}\n")},
		}, {
			name: "webhooks",
			doc: sections{applications: withApp(`    delivery:
      webhooks:
        - {type: rollout, url: 'http://a/'}
        - {name: gate, type: confirm, url: 'gate.example.com'}
        - {name: gate, url: 'https://b/', timeout: -1s}
        - {name: every-type-1, type: confirm-rollout, url: 'http://c/'}
        - {name: every-type-2, type: pre-rollout, url: 'http://c/'}
        - {name: every-type-3, type: confirm-traffic-increase, url: 'http://c/'}
        - {name: every-type-4, type: confirm-promotion, url: 'http://c/'}
        - {name: every-type-5, type: post-rollout, url: 'http://c/'}
        - {name: every-type-6, type: rollback, url: 'http://c/'}
        - {name: every-type-7, type: event, url: 'http://c/'}
        - {name: no-url}
`)},
			want: []Problem{
				{"applications[0].delivery.webhooks[0].name", "required"},
				{"applications[0].delivery.webhooks[1].type", `unknown webhook type "confirm"; want one of confirm-rollout, pre-rollout, rollout, confirm-traffic-increase, confirm-promotion, post-rollout, rollback, event`},
				{"applications[0].delivery.webhooks[1].url", `want an http or https URL, got scheme ""`},
				{"applications[0].delivery.webhooks[2].name", `duplicate webhook name "gate" (first used by applications[0].delivery.webhooks[1])`},
				{"applications[0].delivery.webhooks[2].timeout", "must be at least 1ms, got -1s"},
				{"applications[0].delivery.webhooks[10].url", "required: an http or https URL"},
			},
		}, {
			name: "same webhook name in two applications",
			doc: sections{applications: app + `    delivery: {webhooks: [{name: load, url: 'http://a/'}]}
  - name: other
    image: registry.example.com/demo/other
    workload: {name: other}
    service: {port: 80}
    delivery: {webhooks: [{name: load, url: 'http://a/'}]}
`},
		},
		// many at once
		{
			name: "every section wrong, reported in order",
			doc: sections{
				server:    "server: {listen: nope}\n",
				events:    "events: {sink: 'ftp://x'}\n",
				receivers: "receivers: [{name: r, type: sns, secret: {env: FLOTILLA_NO_SUCH_VAR}}]\n",
				fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c2, kubeconfig: missing.kubeconfig}
  waves:
    - clusters: [c1]
    - clusters: [c9]
`,
				applications: withApp("    track: Minor\n"),
			},
			want: []Problem{
				{"server.listen", `invalid address "nope": want host:port, such as "127.0.0.1:8080"`},
				{"events.sink", `want an http or https URL, got scheme "ftp"`},
				{"receivers[0].type", `unknown receiver type "sns"; want one of ` + strings.Join(ReceiverTypes, ", ")},
				{"receivers[0].secret.env", `environment variable "FLOTILLA_NO_SUCH_VAR" is not set or is empty`},
				{"fleet.clusters[1].kubeconfig", `file "` + filepath.Join(dir, "missing.kubeconfig") + `" does not exist`},
				{"fleet.waves[1].clusters[0]", `unknown cluster "c9"`},
				{"fleet.clusters[1]", `cluster "c2" is in no wave, so it would never receive rollouts; add it to one of fleet.waves`},
				{"applications[0].track", `unknown track "Minor"; want one of PatchLevel, MinorVersion, MajorVersion, Newest`},
			},
		}, {
			name: "empty document",
			doc:  sections{receivers: "-", fleet: "-", applications: "-"},
			want: []Problem{
				{"receivers", "at least one receiver is required"},
				{"fleet.clusters", "at least one cluster is required"},
				{"fleet.waves", "at least one wave is required"},
				{"applications", "at least one application is required"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc.doc()), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
				if c != nil {
					t.Errorf("Parse returned a config with its error")
				}
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationErrorMessage(t *testing.T) {
	err := &ValidationError{Problems: []Problem{
		{"applications[0].track", `unknown track "Minor"; want one of PatchLevel, MinorVersion, MajorVersion, Newest`},
		{"fleet.waves[1].clusters[0]", `unknown cluster "c9"`},
	}}
	want := `applications[0].track: unknown track "Minor"; want one of PatchLevel, MinorVersion, MajorVersion, Newest
fleet.waves[1].clusters[0]: unknown cluster "c9"`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}

func TestParseReturnsValidationErrorUnwrapped(t *testing.T) {
	_, err := Parse([]byte("receivers: []\n"), t.TempDir())
	if _, ok := err.(*ValidationError); !ok { //nolint:errorlint // the unwrapped type is the contract
		t.Errorf("Parse error is %T, want *ValidationError", err)
	}
}

func TestValidationDefaults(t *testing.T) {
	dir := testDir(t)
	c, err := Parse([]byte(sections{applications: withApp(`    validation:
      items:
        - manual: {}
        - promQL: {query: 'up == bool 1', prometheusURL: 'http://prometheus:9090'}
`)}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Applications[0]
	if got := a.Validation.ValidationPeriod.Duration; got != DefaultValidationPeriod {
		t.Errorf("validation period %v, want %v", got, DefaultValidationPeriod)
	}
	if got := a.Validation.Items[0].Manual.StatusAfterDeadline; got != "none" {
		t.Errorf("statusAfterDeadline %q, want none", got)
	}
	ms := a.Delivery.TrafficAnalysis.Metrics
	if len(ms) != 1 || ms[0].Name != "promql-1" || ms[0].CustomMetric == nil ||
		ms[0].CustomMetric.Query != "up == bool 1" || ms[0].CustomMetric.Provider.Address != "http://prometheus:9090" ||
		ms[0].ThresholdRange == nil || ms[0].ThresholdRange.Min == nil || *ms[0].ThresholdRange.Min != 1 {
		t.Errorf("promQL item rendered as metrics %+v, want one custom metric promql-1 with min 1", ms)
	}
}

// An application's poll interval: its own, else the fleet's (5m by
// default); disabled or 0s is off; git applications are not polled.
func TestPollInterval(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "s3cret")
	tests := []struct {
		name       string
		fleet, app string // the fleet's poll and the application's, YAML flow
		want       time.Duration
	}{
		{name: "default", want: DefaultRegistryPoll},
		{name: "the fleet's", fleet: "{interval: 10m}", want: 10 * time.Minute},
		{name: "the fleet's off", fleet: "{interval: 0s}", want: 0},
		{name: "the fleet's disabled", fleet: "{disabled: true}", want: 0},
		{name: "the application's", fleet: "{interval: 10m}", app: "{interval: 2s}", want: 2 * time.Second},
		{name: "the application's within a fleet disabled", fleet: "{disabled: true}", app: "{interval: 2s}", want: 2 * time.Second},
		{name: "the application's off", app: "{interval: 0s}", want: 0},
		{name: "the application's disabled", app: "{disabled: true, interval: 1m}", want: 0},
		{name: "the application's without an interval", fleet: "{interval: 3m}", app: "{}", want: 3 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := sections{}
			if tt.fleet != "" {
				doc.fleet = "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}], poll: " + tt.fleet + "}\n"
			}
			if tt.app != "" {
				doc.applications = withApp("    poll: " + tt.app + "\n")
			}
			c, err := Parse([]byte(doc.doc()), testDir(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.PollInterval(c.Applications[0])); diff != "" {
				t.Errorf("PollInterval (-want +got):\n%s", diff)
			}
		})
	}
}

// Scale-out mode's defaults: the stream, three replicas, sixteen
// partitions, the replica named by $POD_NAME; no bound by number on the
// ids (the stream's window is the bound).
func TestBusDefaults(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "s3cret")
	t.Setenv("POD_NAME", "flotilla-7d9f-abcde")
	dir := t.TempDir()
	_, err := Parse([]byte(sections{server: "server: {bus: {url: 'nats://nats:4222', credentialsFile: nats.creds}}\n"}.doc()), dir)
	if err == nil {
		t.Fatal("a missing credentials file was accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.creds"), []byte("creds"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"c1.kubeconfig", "c2.kubeconfig"} {
		_ = os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600)
	}
	cfg, err := Parse([]byte(sections{server: "server: {bus: {url: 'nats://nats:4222', credentialsFile: nats.creds}}\n"}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Bus{URL: "nats://nats:4222", CredentialsFile: filepath.Join(dir, "nats.creds"), Stream: "FLOTILLA", Replicas: 3, Partitions: 16, Replica: "flotilla-7d9f-abcde"}
	if diff := cmp.Diff(want, cfg.Server.Bus); diff != "" {
		t.Errorf("bus (-want +got):\n%s", diff)
	}
	if cfg.Server.DedupeMaxEvents != nil {
		t.Errorf("dedupeMaxEvents defaulted to %d in scale-out mode", *cfg.Server.DedupeMaxEvents)
	}
}

// writeSigningFiles writes a cosign.pub, a trusted root without Rekor logs
// (ca-root.json) and one with a log (log-root.json).
func writeSigningFiles(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "cosign.pub"), string(sigtest.NewKeypair().PublicKeyPEM()))
	ca, err := sigtest.NewCA().TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "ca-root.json"), string(ca))
	l, err := rekortest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	lr, err := l.TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "log-root.json"), string(lr))
}
