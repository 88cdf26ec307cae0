package bootstrap

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// deployment parses a Deployment written as YAML in a test.
func deployment(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// flaggerDeployment is a Deployment in flagger/flagger with metadata meta
// (indented YAML under metadata:) running image.
func flaggerDeployment(t *testing.T, meta, image string) *unstructured.Unstructured {
	t.Helper()
	return deployment(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: flagger
  namespace: flagger
`+meta+`
spec:
  template:
    spec:
      containers:
        - name: flagger
          image: `+image+`
`)
}

const helmMeta = `  labels:
    app.kubernetes.io/managed-by: Helm
  annotations:
    meta.helm.sh/release-name: flagger
    meta.helm.sh/release-namespace: flagger`

// Which Deployments run a Flagger bootstrap did not install, who installed
// it (labels, annotations), and its version (the image's tag).
func TestForeignFlagger(t *testing.T) {
	ref := Ref{Kind: "Deployment", Namespace: "flagger", Name: "flagger"}
	own, err := Plan(testConfig(), []string{"us"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bootstraps := own[0].Objects[slices.IndexFunc(own[0].Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })].DeepCopy()
	bootstraps.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}, {Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}})

	for _, tc := range []struct {
		name string
		d    *unstructured.Unstructured
		want Foreign
		ok   bool
	}{
		{
			name: "Helm",
			d:    flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.42.0"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerHelm, Source: "release flagger in flagger"}, ok: true,
		},
		{
			name: "Helm's label alone",
			d:    flaggerDeployment(t, "  labels:\n    app.kubernetes.io/managed-by: Helm", "ghcr.io/fluxcd/flagger:1.41.0"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.41.0", Version: "1.41.0", Installer: InstallerHelm}, ok: true,
		},
		{
			name: "Flux's helm-controller, which leaves Helm's marks too",
			d: flaggerDeployment(t, `  labels:
    app.kubernetes.io/managed-by: Helm
    helm.toolkit.fluxcd.io/name: flagger
    helm.toolkit.fluxcd.io/namespace: flux-system
  annotations:
    meta.helm.sh/release-name: flux-system-flagger
    meta.helm.sh/release-namespace: flagger`, "ghcr.io/fluxcd/flagger:1.42.0"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerFlux, Source: "HelmRelease flux-system/flagger"}, ok: true,
		},
		{
			name: "Flux's kustomize-controller",
			d:    flaggerDeployment(t, "  labels:\n    kustomize.toolkit.fluxcd.io/name: infra\n    kustomize.toolkit.fluxcd.io/namespace: flux-system", "ghcr.io/fluxcd/flagger:1.40.0"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.40.0", Version: "1.40.0", Installer: InstallerFlux, Source: "Kustomization flux-system/infra"}, ok: true,
		},
		{
			name: "a mirror with a port, a v tag, no installer's marks",
			d:    flaggerDeployment(t, "  labels:\n    app: flagger", "mirror.example.com:5000/fluxcd/flagger:v1.43.1"),
			want: Foreign{Deployment: ref, Image: "mirror.example.com:5000/fluxcd/flagger:v1.43.1", Version: "1.43.1", Installer: InstallerOther}, ok: true,
		},
		{
			name: "a tag and a digest",
			d:    flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.42.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.42.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Version: "1.42.0", Installer: InstallerHelm, Source: "release flagger in flagger"}, ok: true,
		},
		{
			name: "a digest only: the version is unknown",
			d:    flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Installer: InstallerHelm, Source: "release flagger in flagger"}, ok: true,
		},
		{
			name: "latest: the version is unknown",
			d:    flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:latest"),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:latest", Installer: InstallerHelm, Source: "release flagger in flagger"}, ok: true,
		},
		{
			name: "available",
			d: func() *unstructured.Unstructured {
				d := flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.42.0")
				d.SetGeneration(2)
				d.Object["status"] = map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
				return d
			}(),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerHelm, Source: "release flagger in flagger", Available: true}, ok: true,
		},
		{
			name: "Flagger in a second container",
			d: deployment(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: flagger, namespace: flagger}
spec:
  template:
    spec:
      containers:
        - {name: proxy, image: envoyproxy/envoy:v1.30.0}
        - {name: flagger, image: ghcr.io/fluxcd/flagger:1.42.0}
`),
			want: Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerOther}, ok: true,
		},
		{name: "the load tester is not Flagger", d: flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger-loadtester:0.35.0")},
		{name: "an image named flagger without a repository path", d: flaggerDeployment(t, helmMeta, "flagger:1.42.0")},
		{name: "bootstrap's own Flagger", d: bootstraps},
		{
			name: "a Helm Flagger bootstrap applied over (--manage-flagger)",
			d: func() *unstructured.Unstructured {
				d := flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.41.0")
				d.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate}, {Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
				return d
			}(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ForeignFlagger(tc.d)
			if ok != tc.ok {
				t.Fatalf("foreign %t, want %t (%+v)", ok, tc.ok, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestForeignString(t *testing.T) {
	for _, tc := range []struct {
		f    Foreign
		want string
	}{
		{
			Foreign{Deployment: Ref{Kind: "Deployment", Namespace: "flagger", Name: "flagger"}, Version: "1.42.0", Installer: InstallerHelm, Source: "release flagger in flagger"},
			"Flagger 1.42.0 installed by Helm (release flagger in flagger, Deployment flagger/flagger)",
		},
		{
			Foreign{Deployment: Ref{Kind: "Deployment", Namespace: "tools", Name: "canaries"}, Installer: InstallerOther},
			"Flagger of unknown version installed by another installer (Deployment tools/canaries)",
		},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// fleet check's verdict on a Flagger bootstrap did not install: its
// version against the tested one, then its availability.
func TestJudgeForeign(t *testing.T) {
	ref := Ref{Kind: "Deployment", Namespace: "flagger", Name: "flagger"}
	helm := func(version string, available bool) Foreign {
		return Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger:" + version, Version: version, Installer: InstallerHelm, Available: available}
	}
	digest := Foreign{Deployment: ref, Image: "ghcr.io/fluxcd/flagger@sha256:abc", Installer: InstallerFlux, Available: true}
	for _, tc := range []struct {
		name string
		f    Foreign
		want Finding
	}{
		{"newer", helm("1.42.0", true), Finding{Cluster: "c1", Object: ref, State: OK, Detail: "Flagger 1.42.0 (installed by Helm), newer than the tested " + FlaggerVersion}},
		{"a newer prerelease", helm("1.42.0-rc.1", true), Finding{Cluster: "c1", Object: ref, State: OK, Detail: "Flagger 1.42.0-rc.1 (installed by Helm), newer than the tested " + FlaggerVersion}},
		{"the tested one", helm(FlaggerVersion, true), Finding{Cluster: "c1", Object: ref, State: OK, Detail: "Flagger " + FlaggerVersion + " (installed by Helm), the tested version"}},
		{"older", helm("1.38.0", true), Finding{Cluster: "c1", Object: ref, State: Outdated, Detail: "Flagger 1.38.0 (installed by Helm), older than the tested " + FlaggerVersion}},
		{"unknown", digest, Finding{Cluster: "c1", Object: ref, State: OK,
			Detail: "Flagger (installed by Flux): its version cannot be read from its image ghcr.io/fluxcd/flagger@sha256:abc; flotilla is tested with " + FlaggerVersion}},
		{"newer, not available", helm("1.42.0", false), Finding{Cluster: "c1", Object: ref, State: NotReady,
			Detail: "Flagger 1.42.0 (installed by Helm), newer than the tested " + FlaggerVersion + "; no available replica yet"}},
		{"older, not available", helm("1.38.0", false), Finding{Cluster: "c1", Object: ref, State: Outdated,
			Detail: "Flagger 1.38.0 (installed by Helm), older than the tested " + FlaggerVersion + "; no available replica yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, JudgeForeign("c1", tc.f)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// fakeCluster is an Applier and Lister over objects in memory: Get finds
// them, a dry run returns the object applied, a real apply is recorded.
type fakeCluster struct {
	objs    []*unstructured.Unstructured
	listErr error
	applied []Ref
}

func (c *fakeCluster) Get(_ context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	for _, x := range c.objs {
		if RefOf(x) == RefOf(o) {
			return x.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: o.GetKind()}, o.GetName())
}

func (c *fakeCluster) ApplyObject(_ context.Context, o *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	if !dryRun {
		c.applied = append(c.applied, RefOf(o))
	}
	return o.DeepCopy(), nil
}

func (c *fakeCluster) List(_ context.Context, _, kind string) ([]unstructured.Unstructured, error) {
	if c.listErr != nil {
		return nil, c.listErr
	}
	var out []unstructured.Unstructured
	for _, x := range c.objs {
		if x.GetKind() == kind {
			out = append(out, *x.DeepCopy())
		}
	}
	return out, nil
}

func TestFindForeign(t *testing.T) {
	helm := flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.42.0")
	other := deployment(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: podinfo, namespace: shop}\nspec: {template: {spec: {containers: [{name: app, image: ghcr.io/stefanprodan/podinfo:6.0.0}]}}}\n")
	c := &fakeCluster{objs: []*unstructured.Unstructured{other, helm}}
	got, err := FindForeign(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []Foreign{{Deployment: RefOf(helm), Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerHelm, Source: "release flagger in flagger"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	boom := errors.New("forbidden")
	if _, err := FindForeign(context.Background(), &fakeCluster{listErr: boom}); !errors.Is(err, boom) {
		t.Errorf("a failed list: %v, want it wrapped", err)
	}
}

// Flagger's own objects, which bootstrap leaves out where another Flagger
// runs: not a namespace the load tester shares.
func TestWithoutFlagger(t *testing.T) {
	ts, err := Plan(testConfig(), []string{"us"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantFlagger := []Ref{
		{Kind: "Namespace", Name: "flagger-system"},
		{Kind: "CustomResourceDefinition", Name: "alertproviders.flagger.app"},
		{Kind: "CustomResourceDefinition", Name: "canaries.flagger.app"},
		{Kind: "CustomResourceDefinition", Name: "metrictemplates.flagger.app"},
		{Kind: "ServiceAccount", Namespace: "flagger-system", Name: "flagger"},
		{Kind: "ClusterRole", Name: "flagger"},
		{Kind: "ClusterRoleBinding", Name: "flagger"},
		{Kind: "Deployment", Namespace: "flagger-system", Name: "flagger"},
	}
	if diff := cmp.Diff(wantFlagger, ts[0].FlaggerObjects); diff != "" {
		t.Errorf("Flagger's objects (-want +got)\n%s", diff)
	}
	got := refs(ts[0].WithoutFlagger())
	if diff := cmp.Diff(refs(ts[0])[len(wantFlagger):], got); diff != "" {
		t.Errorf("without Flagger (-want +got)\n%s", diff)
	}
	if len(refs(ts[0])) != len(wantFlagger)+len(got) {
		t.Errorf("WithoutFlagger changed the target it was called on: %v", refs(ts[0]))
	}

	ts, err = Plan(testConfig(), []string{"us"}, Options{LoadTesterNamespace: DefaultFlaggerNamespace})
	if err != nil {
		t.Fatal(err)
	}
	got = refs(ts[0].WithoutFlagger())
	if diff := cmp.Diff([]string{"Namespace flagger-system", "Service flagger-system/flagger-loadtester", "Deployment flagger-system/flagger-loadtester"}, got[:3]); diff != "" {
		t.Errorf("the load tester in Flagger's namespace (-want +got)\n%s", diff)
	}
}

// bootstrap leaves another Flagger alone only when Flagger's CRDs are
// there, and then applies nothing of Flagger's.
func TestLeaveAlone(t *testing.T) {
	ts, err := Plan(testConfig(), []string{"us"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := ts[0]
	crds := target.flaggerCRDs()
	ctx := context.Background()

	c := &fakeCluster{objs: crds[1:]}
	_, err = LeaveAlone(ctx, c, target)
	if err == nil || !strings.Contains(err.Error(), "(alertproviders.flagger.app)") {
		t.Errorf("a missing CRD: %v, want it named", err)
	}

	c = &fakeCluster{objs: crds}
	left, err := LeaveAlone(ctx, c, target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, c, left, false); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.applied {
		if slices.Contains(target.FlaggerObjects, r) {
			t.Errorf("bootstrap applied Flagger's %s over another Flagger", r)
		}
	}
	if len(c.applied) == 0 {
		t.Error("bootstrap applied nothing of flotilla's")
	}
}

// check judges another Flagger by its version, never by comparing it with
// bootstrap's, and its CRDs by their presence only.
func TestCheckForeign(t *testing.T) {
	ts, err := Plan(testConfig(), []string{"us"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := ts[0]
	helm := flaggerDeployment(t, helmMeta, "ghcr.io/fluxcd/flagger:1.42.0")
	helm.SetGeneration(1)
	helm.Object["status"] = map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
	// The cluster holds everything bootstrap would apply but Flagger's,
	// a newer Flagger's CRDs (unlike bootstrap's) but one, and Helm's Flagger.
	objs := []*unstructured.Unstructured{helm}
	for _, o := range target.WithoutFlagger().Objects {
		objs = append(objs, o.DeepCopy())
	}
	crds := target.flaggerCRDs()
	for _, crd := range crds[:2] {
		newer := crd.DeepCopy()
		newer.SetLabels(map[string]string{"app.kubernetes.io/version": "1.42.0"})
		objs = append(objs, newer)
	}
	c := &fakeCluster{objs: objs}
	fs, err := FindForeign(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := CheckForeign(context.Background(), c, target, fs)
	if err != nil {
		t.Fatal(err)
	}
	var notOK []Finding
	for _, f := range got {
		if f.State != OK {
			notOK = append(notOK, f)
		}
	}
	want := []Finding{{Cluster: "us", Object: RefOf(crds[2]), State: Missing,
		Detail: "the Flagger there needs it; bootstrap does not apply it over a Flagger it did not install"}}
	if diff := cmp.Diff(want, notOK); diff != "" {
		t.Errorf("findings not OK (-want +got)\n%s", diff)
	}
	wantFirst := Finding{Cluster: "us", Object: RefOf(helm), State: OK, Detail: "Flagger 1.42.0 (installed by Helm), newer than the tested " + FlaggerVersion}
	if diff := cmp.Diff(wantFirst, got[0]); diff != "" {
		t.Errorf("Helm's Flagger (-want +got)\n%s", diff)
	}
	if n := len(got); n != 1+len(crds)+len(target.WithoutFlagger().Objects) {
		t.Errorf("%d findings, want one per foreign Flagger, CRD and object of flotilla's", n)
	}
	if len(c.applied) != 0 {
		t.Errorf("check applied %v", c.applied)
	}
}
