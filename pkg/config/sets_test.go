package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shop is a release set of a migration Job, an API and a frontend, with
// fields replaced by the test: "{sets}" the releaseSets section,
// "{migrate}", "{api}", "{frontend}" extra fields of each application.
const shop = `
releaseSets:
{sets}
applications:
  - name: shop-migrate
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [shop/migrate]}}
    namespace: shop
    workload: {kind: Job, name: shop-migrate}
{migrate}
  - name: shop-api
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: ['shop/api/{cluster}']}}
    namespace: shop
    workload: {name: shop-api}
    service: {port: 8080}
    dependsOn: [{name: shop-migrate}]
    delivery: {interval: 10s, iterations: 2}
{api}
  - name: shop-frontend
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [shop/frontend]}}
    namespace: shop
    workload: {name: shop-frontend}
    service: {port: 80}
    dependsOn: [{name: shop-api}]
{frontend}
{extra}
`

const shopSet = "  - {name: shop, applications: [shop-migrate, shop-api, shop-frontend]}"

type shopDoc struct{ sets, migrate, api, frontend, extra string }

func (d shopDoc) String() string {
	return strings.NewReplacer("{sets}", cmpOr(d.sets, shopSet), "{migrate}", d.migrate, "{api}", d.api, "{frontend}", d.frontend, "{extra}", d.extra).Replace(shop)
}

func TestReleaseSetValidation(t *testing.T) {
	dir := testDir(t)
	tests := []struct {
		name  string
		doc   shopDoc
		fleet string
		want  []Problem
	}{
		{name: "valid"},
		{
			// The run's members travel as the PipelineRun's members param.
			name:  "on the tekton executor",
			fleet: "fleet: {executor: tekton, tekton: {cluster: c1}, clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n",
		},
		{
			name: "set named as an application",
			doc:  shopDoc{sets: "  - {name: shop-api, applications: [shop-migrate, shop-api, shop-frontend]}"},
			want: []Problem{{"releaseSets[0].name", `"shop-api" is an application's name: the set's rollouts are named after it`}},
		},
		{
			name: "unnamed set, unknown member, member twice, too few, member of two sets",
			doc:  shopDoc{sets: shopSet + "\n  - {applications: [shop-api]}\n  - {name: third, applications: [nope, nope]}"},
			want: []Problem{
				{"releaseSets[1].name", "required"},
				{"releaseSets[1].applications", "a release set has at least two members"},
				{"releaseSets[1].applications[0]", `"shop-api" is a member of release set shop already: an application is in one set`},
				{"releaseSets[2].applications[0]", `no application "nope" is configured`},
				{"releaseSets[2].applications[1]", `"nope" is listed twice`},
			},
		},
		{
			name: "members of another repository, branch, namespace; an image member (a set of git and image members)",
			doc: shopDoc{
				sets: "  - {name: shop, applications: [shop-migrate, shop-api, shop-frontend, other, elsewhere, img]}",
				extra: `  - name: other
    source: {git: {url: https://git.example.com/platform/other.git, paths: [x]}}
    namespace: shop
    workload: {name: other}
    service: {port: 80}
  - name: elsewhere
    source: {git: {url: https://git.example.com/platform/deployments, branch: dev, paths: [y]}}
    namespace: web
    workload: {name: elsewhere}
    service: {port: 80}
  - name: img
    image: registry.example.com/img
    workload: {name: img}
    service: {port: 80}
`,
			},
			want: []Problem{
				{"releaseSets[0].applications[3]", `"other" follows https://git.example.com/platform/other.git (branch main, tags ""), shop-migrate follows https://git.example.com/platform/deployments.git (branch main, tags ""): a release set's git members are of one repository, branch and tags pattern`},
				{"releaseSets[0].applications[4]", `"elsewhere" follows https://git.example.com/platform/deployments (branch dev, tags ""), shop-migrate follows https://git.example.com/platform/deployments.git (branch main, tags ""): a release set's git members are of one repository, branch and tags pattern`},
				{"applications[4].namespace", `"web", shop-migrate's is "shop": a release set's members are in one namespace (the set is judged by its canaries there)`},
				{"applications[5].namespace", `"default", shop-migrate's is "shop": a release set's members are in one namespace (the set is judged by its canaries there)`},
			},
		},
		{
			name: "dependsOn out of a set, on itself, unknown, outside the set, twice",
			doc: shopDoc{
				sets: "  - {name: shop, applications: [shop-migrate, shop-api, shop-frontend, shop-web]}",
				extra: `  - name: lonely
    image: registry.example.com/lonely
    workload: {name: lonely}
    service: {port: 80}
    dependsOn: [{name: shop-api}]
  - name: shop-web
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [shop/web]}}
    namespace: shop
    workload: {name: shop-web}
    service: {port: 80}
    dependsOn: [{name: shop-api}, {name: shop-web}, {name: nope}, {name: lonely}, {name: shop-api}, {name: ""}]
`,
			},
			want: []Problem{
				{"applications[3].dependsOn[0].name", "lonely is in no release set: dependsOn orders the members of a set (releaseSets)"},
				{"applications[4].dependsOn[1].name", "shop-web depends on itself"},
				{"applications[4].dependsOn[2].name", `no application "nope" is configured`},
				{"applications[4].dependsOn[3].name", `"lonely" is not a member of release set shop`},
				{"applications[4].dependsOn[4].name", `"shop-api" is listed twice`},
				{"applications[4].dependsOn[5].name", "required: the member applied before shop-web"},
			},
		},
		{
			name: "cycle",
			doc:  shopDoc{migrate: "    dependsOn: [{name: shop-frontend}]\n"},
			want: []Problem{{"applications[0].dependsOn", "dependsOn cycle shop-migrate -> shop-frontend -> shop-api -> shop-migrate"}},
		},
		{
			name: "job member with a canary's fields",
			doc:  shopDoc{migrate: "    service: {port: 80}\n    delivery: {interval: 5s}\n"},
			want: []Problem{
				{"applications[0].delivery", "a Job member of a release set has no canary: its Jobs run to completion before its dependents are applied"},
				{"applications[0].service", "a Job member of a release set has no canary: its Jobs run to completion before its dependents are applied"},
			},
		},
		{
			name: "job outside a set",
			doc: shopDoc{extra: `  - name: seed
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [seed]}}
    workload: {kind: Job, name: seed}
`},
			want: []Problem{{"applications[3].workload.kind", "Job is for a member of a release set (releaseSets); an application on its own is a Deployment or DaemonSet"}},
		},
		{
			name: "member's rollout fields",
			doc:  shopDoc{api: "    driftPolicy: revert\n    poll: {interval: 1m}\n    freezeWindows: [{name: night, schedule: '0 22 * * *', duration: 8h}]\n"},
			want: []Problem{
				{"applications[1].freezeWindows", "shop-api is a member of a release set: the set's rollout decides for every member (set releaseSets[].freezeWindows)"},
				{"applications[1].poll", "shop-api is a member of a release set: the set's rollout decides for every member (set releaseSets[].poll)"},
				{"applications[1].driftPolicy", "shop-api is a member of a release set: the set's rollout decides for every member (set releaseSets[].driftPolicy)"},
			},
		},
		{
			name: "member's clusterSelector and onNewVersion",
			doc:  shopDoc{frontend: "    clusterSelector: {matchLabels: {env: prod}}\n    onNewVersion: queue\n"},
			want: []Problem{
				{"applications[2].clusterSelector", `application "shop-frontend" selects no cluster of the fleet (env=prod): label clusters in fleet.clusters[].labels`},
				{"applications[2].clusterSelector", "shop-frontend is a member of a release set: the set's rollout decides for every member (set releaseSets[].clusterSelector)"},
				{"applications[2].onNewVersion", "shop-frontend is a member of a release set: the set's rollout decides for every member (set releaseSets[].onNewVersion)"},
			},
		},
		{
			name: "set's own rollout fields",
			doc: shopDoc{sets: `  - name: shop
    applications: [shop-migrate, shop-api, shop-frontend]
    freezeWindows: [{name: night, schedule: '0 22 * * *', duration: 8h}]
    clusterSelector: {matchLabels: {region: eu}}
    onNewVersion: queue
    poll: {interval: 1m}`},
			fleet: "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {region: eu}}], waves: [{clusters: [c1]}]}\n",
		},
		{
			name: "set's own rollout fields wrong",
			doc: shopDoc{sets: `  - name: shop
    applications: [shop-migrate, shop-api, shop-frontend]
    freezeWindows: [{name: night, schedule: 'at night', duration: 8h}]
    clusterSelector: {matchLabels: {region: mars}}
    onNewVersion: later
    poll: {interval: 10ms}`},
			want: []Problem{
				{"releaseSets[0].onNewVersion", `unknown onNewVersion "later"; want one of supersede, queue`},
				{"releaseSets[0].freezeWindows[0]", `schedule "at night": expected exactly 5 fields, found 2: [at night]`},
				{"releaseSets[0].poll.interval", "10ms: want 0s (off) or at least 1s"},
				{"releaseSets[0].clusterSelector", `release set "shop" selects no cluster of the fleet (region=mars): label clusters in fleet.clusters[].labels`},
			},
		},
		{
			name: "set's driftPolicy unknown",
			doc:  shopDoc{sets: "  - {name: shop, applications: [shop-migrate, shop-api, shop-frontend], driftPolicy: undo}"},
			want: []Problem{{"releaseSets[0].driftPolicy", `unknown driftPolicy "undo"; want one of report, revert`}},
		},
		{
			name: "no canaried member",
			doc: shopDoc{
				sets: "  - {name: shop, applications: [shop-migrate, seed]}\n  - {name: web, applications: [shop-api, shop-frontend]}",
				extra: `  - name: seed
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [seed]}}
    namespace: shop
    workload: {kind: Job, name: seed}
`,
			},
			want: []Problem{
				{"releaseSets[0].applications", "no member has a Deployment or DaemonSet workload: a set is judged by its members' canaries"},
				{"applications[1].dependsOn[0].name", `"shop-migrate" is not a member of release set web`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(sections{applications: tt.doc.String(), fleet: tt.fleet}.doc()), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// webSet is a release set of two image members, an API and a frontend
// depending on it, with fields replaced by the test as shopDoc's.
const webSet = `
releaseSets:
{sets}
applications:
  - name: web-frontend
    image: registry.example.com/web/frontend
    namespace: web
    workload: {name: web-frontend}
    service: {port: 80}
    dependsOn: [{name: web-api}]
    delivery: {interval: 5s, iterations: 2}
{frontend}
  - name: web-api
    image: registry.example.com/web/api
    namespace: web
    workload: {name: web-api}
    service: {port: 8080}
    delivery: {interval: 10s, iterations: 3}
{api}
{extra}
`

func (d shopDoc) web() string {
	return strings.NewReplacer("{sets}", cmpOr(d.sets, "  - {name: web, applications: [web-frontend, web-api]}"), "{api}", d.api, "{frontend}", d.frontend, "{extra}", d.extra).Replace(webSet)
}

// TestImageSetValidation: a set of image members is accepted; what this
// slice cannot deliver is refused, named by its field.
func TestImageSetValidation(t *testing.T) {
	dir := testDir(t)
	writeSigningFiles(t, dir)
	tests := []struct {
		name  string
		doc   shopDoc
		fleet string
		want  []Problem
	}{
		{name: "image members"},
		{
			// Its pushes are judged by its own policy
			// (docs/design/release-sets.md, "Image members").
			name: "a member's own verify",
			doc:  shopDoc{api: "    verify: {signatures: [{name: release, key: {file: cosign.pub}, trustedRoot: {file: log-root.json}}]}\n"},
		},
		{
			// The PipelineRun's members param carries image members to
			// apply-canary, as the embedded executor's run does.
			name:  "on the tekton executor",
			fleet: "fleet: {executor: tekton, tekton: {cluster: c1}, clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n",
		},
		{
			// A member's own verify is accepted (its pushes judged by it):
			// only verify's own checks of its signers remain.
			name: "gitops, verify and a Job",
			doc: shopDoc{
				frontend: "    gitops: {url: https://git.example.com/d.git, paths: [a.yaml]}\n",
				api:      "    verify: {signatures: [{name: a, key: {env: FLOTILLA_TEST_TOKEN}}]}\n",
				sets:     "  - {name: web, applications: [web-frontend, web-api, web-seed]}",
				extra: `  - name: web-seed
    image: registry.example.com/web/seed
    namespace: web
    workload: {kind: Job, name: web-seed}
`,
			},
			want: []Problem{
				// verify's own checks, as for any application.
				{"applications[1].verify.signatures[0].key", "not a PEM public key (cosign.pub): PEM decoding failed"},
				{"applications[1].verify.signatures[0].trustedRoot", "required with key: Sigstore's trusted_root.json naming the Rekor log its signatures must be in, as a file (or verify.ignoreTlog: true, weaker)"},
				{"applications[0].gitops", "web-frontend is an image member of a release set: the set's run sets its image in the clusters (gitops is not for a member)"},
				{"applications[2].workload.kind", "web-seed is an image member of a release set: its workload is a Deployment or DaemonSet (a Job member is a git application)"},
			},
		},
		{
			name: "two members of one image",
			doc: shopDoc{
				sets: "  - {name: web, applications: [web-frontend, web-api, web-admin]}",
				extra: `  - name: web-admin
    image: registry.example.com/web/api
    namespace: web
    workload: {name: web-admin}
    service: {port: 8080}
`,
			},
			want: []Problem{
				{"applications[2].image", "registry.example.com/web/api, web-api's image too: a push of an image names one member of a release set"},
			},
		},
		{
			name: "a set of git and image members led by an image member: accepted (an image lead)",
			doc: shopDoc{
				sets: "  - {name: web, applications: [web-frontend, web-api, web-config]}",
				extra: `  - name: web-config
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [web/config]}}
    namespace: web
    workload: {name: web-config}
    service: {port: 80}
`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(sections{applications: tt.doc.web(), fleet: tt.fleet}.doc()), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImageSetApplication: the set of image members valid, its
// application is built as a git set's is,
// without a source: the lead's workload (the API, first in dependsOn
// order), the members' deadlines summed.
func TestImageSetApplication(t *testing.T) {
	c, err := decode([]byte(sections{applications: shopDoc{sets: "  - {name: web, applications: [web-frontend, web-api], onNewVersion: queue}"}.web()}.doc()))
	if err != nil {
		t.Fatal(err)
	}
	dir := testDir(t)
	applyDefaults(c, dir)
	var got []Problem
	if verr := validate(c); verr != nil {
		got = verr.Problems
	}
	if d := cmp.Diff([]Problem(nil), got); d != "" {
		t.Fatalf("problems of a valid set of image members (-want +got):\n%s", d)
	}
	foldReleaseSets(c)
	set, ok := c.Application("web")
	if !ok {
		t.Fatal("no application web")
	}
	if d := cmp.Diff(&SetSpec{Members: []SetMember{{Name: "web-api", Image: "registry.example.com/web/api"}, {Name: "web-frontend", Image: "registry.example.com/web/frontend"}}}, set.Set); d != "" {
		t.Errorf("set (-want +got):\n%s", d)
	}
	if set.Source != nil || set.Image != "" {
		t.Errorf("the set's source %+v, image %q; want neither (its version is one digest per member)", set.Source, set.Image)
	}
	if set.Workload.Name != "web-api" || set.Namespace != "web" || set.Service.Port != 8080 || set.OnNewVersion != OnNewVersionQueue {
		t.Errorf("lead: workload %s, namespace %s, port %d, onNewVersion %s; want web-api, web, 8080, queue", set.Workload.Name, set.Namespace, set.Service.Port, set.OnNewVersion)
	}
	var sum time.Duration
	for _, m := range []string{"web-api", "web-frontend"} {
		a, _ := c.Application(m)
		if a.MemberOf != "web" {
			t.Errorf("%s: MemberOf %q, want web", m, a.MemberOf)
		}
		sum += a.Delivery.StepDeadline()
	}
	if got := set.Delivery.StepDeadline(); got != sum {
		t.Errorf("the set's step deadline %s, want the members' sum %s", got, sum)
	}
}

// TestReleaseSetApplication: Load adds the set's application, its members
// in dependsOn order (not the set's), the lead's canary and the members'
// deadlines summed.
func TestReleaseSetApplication(t *testing.T) {
	dir := testDir(t)
	doc := shopDoc{sets: `  - name: shop
    applications: [shop-frontend, shop-api, shop-migrate]
    driftPolicy: revert
    freezeWindows: [{name: night, schedule: '0 22 * * *', duration: 8h}]
    clusterSelector: {matchLabels: {region: eu}}
    onNewVersion: queue
    poll: {interval: 1m}`}
	fleet := "fleet: {clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {region: eu}}, {name: c2, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1, c2]}]}\n"
	c, err := Parse([]byte(sections{applications: doc.String(), fleet: fleet}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
	set, ok := c.Application("shop")
	if !ok {
		t.Fatal("no application shop")
	}
	want := &SetSpec{Members: []SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}, {Name: "shop-frontend"}}}
	if d := cmp.Diff(want, set.Set); d != "" {
		t.Errorf("set (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"shop/migrate", "shop/api/{cluster}", "shop/frontend"}, set.Git().Paths); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	if set.Workload.Name != "shop-api" || set.Namespace != "shop" || set.Service.Port != 8080 {
		t.Errorf("lead: workload %s, namespace %s, port %d; want shop-api, shop, 8080", set.Workload.Name, set.Namespace, set.Service.Port)
	}
	var sum time.Duration
	for _, m := range []string{"shop-migrate", "shop-api", "shop-frontend"} {
		a, _ := c.Application(m)
		if a.MemberOf != "shop" {
			t.Errorf("%s: MemberOf %q, want shop", m, a.MemberOf)
		}
		sum += a.Delivery.StepDeadline()
	}
	if got := set.Delivery.StepDeadline(); got != sum {
		t.Errorf("the set's step deadline %s, want the members' sum %s", got, sum)
	}
	if set.MemberOf != "" {
		t.Errorf("the set is a member of %q", set.MemberOf)
	}
	// The set's own rollout fields are its application's, honoured where
	// an application's are.
	type fields struct {
		DriftPolicy, OnNewVersion string
		Freeze                    []string
		Targets                   []bool
		Poll                      time.Duration
	}
	got := fields{DriftPolicy: set.DriftPolicy, OnNewVersion: set.OnNewVersion, Poll: c.PollInterval(set)}
	for _, w := range set.FreezeWindows {
		got.Freeze = append(got.Freeze, w.Name)
	}
	for _, cl := range c.Fleet.Clusters {
		got.Targets = append(got.Targets, set.Targets(cl))
	}
	want2 := fields{DriftPolicy: DriftPolicyRevert, OnNewVersion: OnNewVersionQueue, Freeze: []string{"night"}, Targets: []bool{true, false}, Poll: time.Minute}
	if d := cmp.Diff(want2, got); d != "" {
		t.Errorf("the set's rollout fields (-want +got):\n%s", d)
	}
	// Without them: an application's defaults.
	plain, err := Parse([]byte(sections{applications: shopDoc{}.String()}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := plain.Application("shop"); a.OnNewVersion != OnNewVersionSupersede || a.DriftPolicy != "" || a.ClusterSelector != nil {
		t.Errorf("a set without rollout fields: onNewVersion %q, driftPolicy %q, selector %v; want supersede and none", a.OnNewVersion, a.DriftPolicy, a.ClusterSelector)
	}
}

// TestExampleReleaseSet loads the commented release set of
// config/example.yaml: a valid configuration of the set's application.
func TestExampleReleaseSet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "# releaseSets:":
			in = true
		case in && !strings.HasPrefix(line, "#"):
			in = false
		}
		if !in {
			continue
		}
		line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
		if line == "# and, as entries of applications:" {
			line = "applications:"
		}
		block = append(block, line)
	}
	if len(block) < 5 {
		t.Fatalf("found no commented releaseSets block in example.yaml: %q", block)
	}
	c, err := Parse([]byte(sections{applications: strings.Join(block, "\n") + "\n"}.doc()), testDir(t))
	if err != nil {
		t.Fatalf("example.yaml's release set:\n%v", err)
	}
	set, ok := c.Application("shop")
	if !ok || set.Set == nil {
		t.Fatal("no release set shop")
	}
	if d := cmp.Diff([]string{"shop-migrate", "shop-api", "shop-frontend"}, set.Set.Names()); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}
}

// mixedShop is a release set of git and image members: the migration Job
// and the API from the repository, the frontend an image; "{sets}" and
// "{frontend}" are replaced as shopDoc's.
const mixedShop = `
releaseSets:
{sets}
applications:
  - name: shop-migrate
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: [shop/migrate]}}
    namespace: shop
    workload: {kind: Job, name: shop-migrate}
  - name: shop-frontend
    image: registry.example.com/shop/frontend
    namespace: shop
    workload: {name: shop-frontend}
    service: {port: 80}
{frontend}
  - name: shop-api
    source: {git: {url: https://git.example.com/platform/deployments.git, paths: ['shop/api/{cluster}']}}
    namespace: shop
    workload: {name: shop-api}
    service: {port: 8080}
{api}
`

// mixed is mixedShop, the frontend depending on the API and the API on
// the Job unless d says what each depends on.
func (d shopDoc) mixed() string {
	return strings.NewReplacer("{sets}", cmpOr(d.sets, "  - {name: shop, applications: [shop-frontend, shop-api, shop-migrate]}"),
		"{api}", cmpOr(d.api, "    dependsOn: [{name: shop-migrate}]\n"), "{frontend}", cmpOr(d.frontend, "    dependsOn: [{name: shop-api}]\n")).Replace(mixedShop)
}

// TestMixedSetValidation: a set of git and image members is accepted
// (docs/design/release-sets.md, "Git and image members"), led by a git
// member or an image one ("An image lead"), on either executor, with a
// driftPolicy of its own. Catches: an image lead refused (the run applies
// its canary, without a version too), a Tekton fleet refused (its
// PipelineRun carries the set's members to apply-manifests as the embedded
// run does); its driftPolicy refused (the reconciler checks such a set) or
// not checked as a set's.
func TestMixedSetValidation(t *testing.T) {
	dir := testDir(t)
	tekton := "fleet: {executor: tekton, tekton: {cluster: c1}, clusters: [{name: c1, kubeconfig: c1.kubeconfig}], waves: [{clusters: [c1]}]}\n"
	tests := []struct {
		name  string
		doc   shopDoc
		fleet string
		want  []Problem
	}{
		{name: "git and image members"},
		{
			name: "an image lead",
			doc: shopDoc{
				frontend: "    delivery: {interval: 5s}\n",
				api:      "    dependsOn: [{name: shop-frontend}]\n",
			},
		},
		{
			name: "an image lead listed first, depending on nothing",
			doc:  shopDoc{frontend: "\n"},
		},
		{
			name: "its driftPolicy",
			doc:  shopDoc{sets: "  - {name: shop, applications: [shop-frontend, shop-api, shop-migrate], driftPolicy: revert}"},
		},
		{
			name: "its driftPolicy unknown",
			doc:  shopDoc{sets: "  - {name: shop, applications: [shop-frontend, shop-api, shop-migrate], driftPolicy: undo}"},
			want: []Problem{{"releaseSets[0].driftPolicy", `unknown driftPolicy "undo"; want one of report, revert`}},
		},
		{
			name:  "on the tekton executor",
			fleet: tekton,
		},
		{
			name:  "an image lead on the tekton executor",
			doc:   shopDoc{frontend: "\n"},
			fleet: tekton,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(sections{applications: tt.doc.mixed(), fleet: tt.fleet}.doc()), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMixedSetApplication: the set of git and image members' application
// is a git set's (its source the git members' repository, tracking their
// paths only), its members in dependsOn order across kinds, each image
// member naming its image, the set's own driftPolicy its application's
// (the reconciler's).
func TestMixedSetApplication(t *testing.T) {
	doc := shopDoc{sets: "  - {name: shop, applications: [shop-frontend, shop-api, shop-migrate], driftPolicy: revert}"}
	c, err := Parse([]byte(sections{applications: doc.mixed()}.doc()), testDir(t))
	if err != nil {
		t.Fatal(err)
	}
	set, ok := c.Application("shop")
	if !ok {
		t.Fatal("no application shop")
	}
	want := &SetSpec{Members: []SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}, {Name: "shop-frontend", Image: "registry.example.com/shop/frontend"}}}
	if d := cmp.Diff(want, set.Set); d != "" {
		t.Errorf("set (-want +got):\n%s", d)
	}
	if !set.Set.Mixed() {
		t.Error("not Mixed")
	}
	if set.Git() == nil || set.Image != "" {
		t.Fatalf("the set's source %+v, image %q; want the git members' repository", set.Source, set.Image)
	}
	if d := cmp.Diff([]string{"shop/migrate", "shop/api/{cluster}"}, set.Git().Paths); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	if set.Workload.Name != "shop-api" {
		t.Errorf("lead %s, want shop-api", set.Workload.Name)
	}
	if set.DriftPolicy != DriftPolicyRevert {
		t.Errorf("driftPolicy %q, want the set's revert", set.DriftPolicy)
	}
}

// TestMixedSetImageLeadApplication: a set of git and image members led by
// its image member (the frontend listed first, depending on nothing;
// docs/design/release-sets.md, "An image lead") is still a git set's
// application: its source, branch and track the git members' (never the
// frontend's own track), tracking their paths; its workload, service and
// delivery the frontend's (the set's canary is the lead's). Catches: a
// set without a source (its commits never matched, its run without a
// checkout), the image lead's version policy taken for the set's commits.
func TestMixedSetImageLeadApplication(t *testing.T) {
	doc := shopDoc{frontend: "    track: Newest\n    delivery: {interval: 7s}\n"}
	c, err := Parse([]byte(sections{applications: doc.mixed()}.doc()), testDir(t))
	if err != nil {
		t.Fatal(err)
	}
	set, ok := c.Application("shop")
	if !ok {
		t.Fatal("no application shop")
	}
	want := &SetSpec{Members: []SetMember{{Name: "shop-frontend", Image: "registry.example.com/shop/frontend"}, {Name: "shop-migrate", Job: true}, {Name: "shop-api"}}}
	if d := cmp.Diff(want, set.Set); d != "" {
		t.Errorf("set (-want +got):\n%s", d)
	}
	if set.Git() == nil || set.Image != "" {
		t.Fatalf("the set's source %+v, image %q; want the git members' repository", set.Source, set.Image)
	}
	type view struct {
		URL, Branch        string
		Paths              []string
		Track              Track
		Workload, Interval string
	}
	got := view{set.Git().URL, set.Git().Branch, set.Git().Paths, set.Track, set.Workload.Name, set.Delivery.Interval.String()}
	wantView := view{"https://git.example.com/platform/deployments.git", "main", []string{"shop/migrate", "shop/api/{cluster}"}, DefaultTrack, "shop-frontend", "7s"}
	if d := cmp.Diff(wantView, got); d != "" {
		t.Errorf("the set's application (-want +got):\n%s", d)
	}
}
