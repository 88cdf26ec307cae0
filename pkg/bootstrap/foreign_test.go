package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// helmFlagger is testdata/helm-flagger.yaml, Flagger's Deployment as Helm
// installs it (release flagger), here in namespace ns, the release's.
func helmFlagger(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "helm-flagger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kube.Decode(b)
	if err != nil || len(objs) != 1 {
		t.Fatalf("testdata/helm-flagger.yaml: %d objects, %v", len(objs), err)
	}
	d := objs[0]
	d.SetNamespace(ns)
	a := d.GetAnnotations()
	a[helmReleaseNamespace] = ns
	d.SetAnnotations(a)
	return d
}

// named renames Deployment d, and the pods it selects after it: Deployments
// of one namespace must not select each other's pods.
func named(t *testing.T, d *unstructured.Unstructured, name string) *unstructured.Unstructured {
	t.Helper()
	d.SetName(name)
	for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		if err := unstructured.SetNestedField(d.Object, name, append(path, "app.kubernetes.io/instance")...); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// withImage sets the image of d's first container.
func withImage(t *testing.T, d *unstructured.Unstructured, image string) *unstructured.Unstructured {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	cs[0].(map[string]any)["image"] = image
	if err := unstructured.SetNestedSlice(d.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	return d
}

// withMarks replaces d's labels and annotations: another installer's marks.
func withMarks(d *unstructured.Unstructured, labels, annotations map[string]string) *unstructured.Unstructured {
	d.SetLabels(labels)
	d.SetAnnotations(annotations)
	return d
}

// clusterAs is the package's cluster as the field manager reaches it:
// FieldManager is bootstrap, "helm" is Helm, "helm-controller" Flux's.
func clusterAs(t *testing.T, manager string) *kube.Applier {
	t.Helper()
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(cfg, manager)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// applyAs applies objs, in order, as the field manager.
func applyAs(ctx context.Context, t *testing.T, manager string, objs ...*unstructured.Unstructured) {
	t.Helper()
	a := clusterAs(t, manager)
	for _, o := range objs {
		if _, err := a.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
}

// The resources deleteAfter deletes.
var deleted = map[string]schema.GroupVersionResource{
	"Namespace":                {Version: "v1", Resource: "namespaces"},
	"CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
}

// deleteAfter deletes, when the test ends, those of objs that are
// Namespaces or CRDs: what a test creates in the package's cluster, whose
// other objects go with their namespaces.
func deleteAfter(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Helper()
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, o := range objs {
			gvr, ok := deleted[o.GetKind()]
			if !ok {
				continue
			}
			if err := dyn.Resource(gvr).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", RefOf(o), err)
			}
		}
	})
}

// testNamespace creates a namespace of the test's own, as Helm's
// --create-namespace would.
func testNamespace(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": randomName(prefix)}}}
	deleteAfter(t, ns) //nolint:contextcheck // its cleanup runs once the test's context has ended
	applyAs(ctx, t, "helm", ns)
	return ns.GetName()
}

// foreignIn is FindForeign's answer for namespace ns only: other tests'
// Flaggers may run in the cluster.
func foreignIn(ctx context.Context, l Lister, ns string) ([]Foreign, error) {
	fs, err := FindForeign(ctx, l)
	return slices.DeleteFunc(fs, func(f Foreign) bool { return f.Deployment.Namespace != ns }), err
}

// availableIn waits until every Flagger FindForeign finds in ns (at least
// one) is available: kwok makes their pods Ready a moment after they are
// created.
func availableIn(ctx context.Context, t *testing.T, l Lister, ns string) []Foreign {
	t.Helper()
	var fs []Foreign
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		fs, err = foreignIn(ctx, l, ns)
		return len(fs) > 0 && !slices.ContainsFunc(fs, func(f Foreign) bool { return !f.Available }), err
	})
	if err != nil {
		t.Fatalf("waiting for the Flaggers in %s to be available: %v (last %+v)", ns, err, fs)
	}
	return fs
}

// failingLister fails every List: a cluster that refuses to list.
type failingLister struct{ err error }

func (l failingLister) List(context.Context, string, string) ([]unstructured.Unstructured, error) {
	return nil, l.err
}

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Which Deployments of a real cluster run a Flagger bootstrap did not
// install, who installed it (labels, annotations) and its version (the
// image's tag): each Deployment applied by the field managers that
// install it, as the API server stores it (managedFields, status).
func TestFindForeign(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := testNamespace(ctx, t, "ff-")
	helm := func(name, image string) *unstructured.Unstructured {
		return withImage(t, named(t, helmFlagger(t, ns), name), image)
	}
	ts, err := Plan(testConfig(), []string{"us"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	own := ts[0].Objects[slices.IndexFunc(ts[0].Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })].DeepCopy()
	own.SetNamespace(ns)
	own.SetName("bootstraps")
	sidecar := helm("sidecar", "ghcr.io/fluxcd/flagger:1.42.0")
	cs, _, _ := unstructured.NestedSlice(sidecar.Object, "spec", "template", "spec", "containers")
	if err := unstructured.SetNestedSlice(sidecar.Object, append([]any{map[string]any{"name": "proxy", "image": "envoyproxy/envoy:v1.30.0"}}, cs...), "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	release := "release flagger in " + ns

	// want.Deployment is the case's Deployment.
	cases := []struct {
		name     string
		d        *unstructured.Unstructured
		managers []string
		want     Foreign
		ok       bool
	}{
		{
			name: "Helm", d: helm("helm", "ghcr.io/fluxcd/flagger:1.42.0"), managers: []string{"helm"},
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerHelm, Source: release}, ok: true,
		},
		{
			name: "Helm's label alone", managers: []string{"helm"},
			d:    withMarks(helm("helm-label", "ghcr.io/fluxcd/flagger:1.41.0"), map[string]string{helmManagedBy: "Helm"}, nil),
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.41.0", Version: "1.41.0", Installer: InstallerHelm}, ok: true,
		},
		{
			name: "Flux's helm-controller, which leaves Helm's marks too", managers: []string{"helm-controller"},
			d: withMarks(helm("flux-helm", "ghcr.io/fluxcd/flagger:1.42.0"),
				map[string]string{helmManagedBy: "Helm", fluxHelmName: "flagger", fluxHelmNamespace: "flux-system"},
				map[string]string{helmReleaseName: "flux-system-flagger", helmReleaseNamespace: ns}),
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerFlux, Source: "HelmRelease flux-system/flagger"}, ok: true,
		},
		{
			name: "Flux's kustomize-controller", managers: []string{"kustomize-controller"},
			d:    withMarks(helm("flux-kustomize", "ghcr.io/fluxcd/flagger:1.40.0"), map[string]string{fluxKustomizeName: "infra", fluxKustomizeNS: "flux-system"}, nil),
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.40.0", Version: "1.40.0", Installer: InstallerFlux, Source: "Kustomization flux-system/infra"}, ok: true,
		},
		{
			name: "a mirror with a port, a v tag, no installer's marks", managers: []string{"kubectl"},
			d:    withMarks(helm("mirror", "mirror.example.com:5000/fluxcd/flagger:v1.43.1"), map[string]string{"app": "flagger"}, nil),
			want: Foreign{Image: "mirror.example.com:5000/fluxcd/flagger:v1.43.1", Version: "1.43.1", Installer: InstallerOther}, ok: true,
		},
		{
			name: "a tag and a digest", d: helm("tag-digest", "ghcr.io/fluxcd/flagger:1.42.0@"+digest), managers: []string{"helm"},
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.42.0@" + digest, Version: "1.42.0", Installer: InstallerHelm, Source: release}, ok: true,
		},
		{
			name: "a digest only: the version is unknown", d: helm("digest", "ghcr.io/fluxcd/flagger@"+digest), managers: []string{"helm"},
			want: Foreign{Image: "ghcr.io/fluxcd/flagger@" + digest, Installer: InstallerHelm, Source: release}, ok: true,
		},
		{
			name: "latest: the version is unknown", d: helm("latest", "ghcr.io/fluxcd/flagger:latest"), managers: []string{"helm"},
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:latest", Installer: InstallerHelm, Source: release}, ok: true,
		},
		{
			name: "Flagger in a second container", d: withMarks(sidecar, nil, nil), managers: []string{"kubectl"},
			want: Foreign{Image: "ghcr.io/fluxcd/flagger:1.42.0", Version: "1.42.0", Installer: InstallerOther}, ok: true,
		},
		{name: "the load tester is not Flagger", d: helm("loadtester", "ghcr.io/fluxcd/flagger-loadtester:0.35.0"), managers: []string{"helm"}},
		{name: "an image named flagger without a repository path", d: helm("no-repository", "flagger:1.42.0"), managers: []string{"helm"}},
		{name: "another application", d: withMarks(helm("podinfo", "ghcr.io/stefanprodan/podinfo:6.0.0"), nil, nil), managers: []string{"kubectl"}},
		{name: "bootstrap's own Flagger", d: own, managers: []string{FieldManager}},
		{name: "a Helm Flagger bootstrap applied over (--manage-flagger)", d: helm("managed", "ghcr.io/fluxcd/flagger:1.41.0"), managers: []string{"helm", FieldManager}},
	}
	for _, tc := range cases {
		for _, m := range tc.managers {
			applyAs(ctx, t, m, tc.d)
		}
	}
	fs, err := foreignIn(ctx, clusterAs(t, FieldManager), ns)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Foreign{}
	for _, f := range fs {
		got[f.Deployment.Name] = f
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := got[tc.d.GetName()]
			if ok != tc.ok {
				t.Fatalf("foreign %t, want %t (%+v)", ok, tc.ok, f)
			}
			if tc.ok {
				tc.want.Deployment = RefOf(tc.d)
			}
			// Whether kwok has made a pod Ready yet is a matter of time.
			if diff := cmp.Diff(tc.want, f, cmpopts.IgnoreFields(Foreign{}, "Available")); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	t.Run("available", func(t *testing.T) {
		helm := Ref{Kind: "Deployment", Namespace: ns, Name: "helm"}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			fs, err := foreignIn(ctx, clusterAs(t, FieldManager), ns)
			return slices.ContainsFunc(fs, func(f Foreign) bool { return f.Deployment == helm && f.Available }), err
		})
		if err != nil {
			t.Errorf("Helm's Flagger never reported available: %v", err)
		}
	})
	t.Run("a failed list", func(t *testing.T) {
		boom := errors.New("forbidden")
		if _, err := FindForeign(ctx, failingLister{boom}); !errors.Is(err, boom) {
			t.Errorf("%v, want it wrapped", err)
		}
	})
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

// foreignTarget is bootstrap's plan for a cluster "us" whose application
// namespace, flotilla's namespace and Flagger's are the test's own, and
// whose Flagger CRDs are renamed into an API group of the test's own: the
// test creates and deletes them as another installer would, never the
// CRDs the fleet's Flagger serves in the package's cluster.
func foreignTarget(t *testing.T) Target {
	t.Helper()
	cfg := &config.Config{
		Fleet:        config.Fleet{Clusters: []config.Cluster{{Name: "us"}}},
		Applications: []config.Application{{Name: "shop", Namespace: randomName("app-")}},
	}
	ts, err := Plan(cfg, nil, Options{Namespace: randomName("id-"), FlaggerNamespace: randomName("fl-")})
	if err != nil {
		t.Fatal(err)
	}
	target := ts[0]
	group := randomName("t") + ".flagger.app"
	for i, o := range target.Objects {
		j := slices.Index(target.FlaggerObjects, RefOf(o))
		if o.GetKind() != "CustomResourceDefinition" || j < 0 {
			continue
		}
		crd := o.DeepCopy()
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		crd.SetName(plural + "." + group)
		if err := unstructured.SetNestedField(crd.Object, group, "spec", "group"); err != nil {
			t.Fatal(err)
		}
		target.Objects[i], target.FlaggerObjects[j] = crd, RefOf(crd)
	}
	deleteAfter(t, target.Objects...)
	return target
}

// managedByBootstrap reads o from the cluster and tells whether bootstrap's
// field manager owns fields of it.
func managedByBootstrap(ctx context.Context, t *testing.T, a Applier, o *unstructured.Unstructured) bool {
	t.Helper()
	cur, err := a.Get(ctx, o)
	if err != nil {
		t.Fatalf("reading %s: %v", RefOf(o), err)
	}
	return appliedByBootstrap(cur)
}

// bootstrap leaves another Flagger alone only when Flagger's CRDs are
// there, and then applies nothing of Flagger's: read from the cluster, the
// Flagger Helm installed and its CRDs have no field of bootstrap's, and
// bootstrap's own Flagger is not there.
func TestLeaveAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	target := foreignTarget(t)
	crds := target.flaggerCRDs()
	helm := helmFlagger(t, testNamespace(ctx, t, "helm-"))
	applyAs(ctx, t, "helm", append(crds[1:], helm)...)
	a := clusterAs(t, FieldManager)

	_, err := LeaveAlone(ctx, a, target)
	if err == nil || !strings.Contains(err.Error(), "("+crds[0].GetName()+")") {
		t.Errorf("a missing CRD: %v, want it named", err)
	}

	applyAs(ctx, t, "helm", crds[0])
	left, err := LeaveAlone(ctx, a, target)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Apply(ctx, a, left, false)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, r := range rs {
		applied = append(applied, r.Object.String())
	}
	if diff := cmp.Diff(refs(target.WithoutFlagger()), applied); diff != "" {
		t.Errorf("applied (-want +got)\n%s", diff)
	}
	for _, o := range append(crds, helm) {
		if managedByBootstrap(ctx, t, a, o) {
			t.Errorf("bootstrap applied over Helm's %s", RefOf(o))
		}
	}
	for _, o := range target.Objects {
		if o.GetKind() != "Deployment" || !slices.Contains(target.FlaggerObjects, RefOf(o)) {
			continue
		}
		if _, err := a.Get(ctx, o); !apierrors.IsNotFound(err) {
			t.Errorf("bootstrap's Flagger %s next to Helm's: %v, want NotFound", RefOf(o), err)
		}
	}
}

// check judges another Flagger by its version, never by comparing it with
// bootstrap's, and its CRDs by their presence only; it changes nothing.
func TestCheckForeign(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	target := foreignTarget(t)
	crds := target.flaggerCRDs()
	a := clusterAs(t, FieldManager)
	// The cluster holds Helm's Flagger 1.42.0, a newer Flagger's CRDs
	// (unlike bootstrap's) but one, and what bootstrap applies but Flagger's.
	helm := helmFlagger(t, testNamespace(ctx, t, "helm-"))
	applyAs(ctx, t, "helm", helm)
	for _, crd := range crds[:2] {
		newer := crd.DeepCopy()
		newer.SetLabels(map[string]string{"app.kubernetes.io/version": "1.42.0"})
		applyAs(ctx, t, "helm", newer)
	}
	if _, err := Apply(ctx, a, target.WithoutFlagger(), false); err != nil {
		t.Fatal(err)
	}
	fs := availableIn(ctx, t, a, helm.GetNamespace())

	got, err := CheckForeign(ctx, a, target, fs)
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
	if _, err := a.Get(ctx, crds[2]); !apierrors.IsNotFound(err) {
		t.Errorf("check created the missing CRD: %v", err)
	}
	for _, o := range append(crds[:2], helm) {
		if managedByBootstrap(ctx, t, a, o) {
			t.Errorf("check applied over Helm's %s", RefOf(o))
		}
	}
}

// takeOverTarget is foreignTarget reduced to Flagger's Deployment, taking
// over (TakeOver), and Flagger's namespace, created as Helm's
// --create-namespace would: bootstrap's ClusterRole and binding are named
// as the fleet's Flagger's.
func takeOverTarget(ctx context.Context, t *testing.T) Target {
	t.Helper()
	target := foreignTarget(t) //nolint:contextcheck // its cleanup runs once the test's context has ended
	i := slices.IndexFunc(target.Objects, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "Deployment" && slices.Contains(target.FlaggerObjects, RefOf(o))
	})
	own := target.Objects[i]
	applyAs(ctx, t, "helm", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": own.GetNamespace()}}})
	return Target{Name: target.Name, Flagger: true, Objects: []*unstructured.Unstructured{own}, FlaggerObjects: []Ref{RefOf(own)}}.TakeOver()
}

// helmAt is Helm's Flagger (testdata/helm-flagger.yaml) where bootstrap's
// Flagger Deployment own goes, with the chart's RollingUpdate strategy and
// its rollingUpdate fields.
func helmAt(t *testing.T, own *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	d := helmFlagger(t, own.GetNamespace())
	d.SetName(own.GetName())
	strategy := map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": int64(1)}}
	if err := unstructured.SetNestedMap(d.Object, strategy, "spec", "strategy"); err != nil {
		t.Fatal(err)
	}
	return d
}

// withSelector sets the labels Deployment d selects its pods by.
func withSelector(t *testing.T, d *unstructured.Unstructured, labels map[string]any) *unstructured.Unstructured {
	t.Helper()
	for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		if err := unstructured.SetNestedMap(d.Object, labels, path...); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// --manage-flagger over a Flagger Helm installed exactly where bootstrap's
// goes: the server refuses bootstrap's apply (Helm's selector is
// immutable; Helm's rollingUpdate cannot stay beside bootstrap's
// Recreate), so bootstrap deletes Helm's Deployment and creates its own;
// check and a dry run only say so. Without taking over, and over a
// Deployment bootstrap applied, nothing is replaced. Read from the cluster.
func TestTakeOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	a := clusterAs(t, FieldManager)
	for _, tc := range []struct {
		name string
		// helm is Helm's Flagger where own goes.
		helm func(own *unstructured.Unstructured) *unstructured.Unstructured
	}{
		{"Helm's selector and strategy", func(own *unstructured.Unstructured) *unstructured.Unstructured { return helmAt(t, own) }},
		{"bootstrap's selector, Helm's strategy", func(own *unstructured.Unstructured) *unstructured.Unstructured {
			labels, _, _ := unstructured.NestedMap(own.Object, "spec", "selector", "matchLabels")
			return withSelector(t, helmAt(t, own), labels)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			takeOver := takeOverTarget(ctx, t)
			own := takeOver.Objects[0]
			helm := tc.helm(own)
			applyAs(ctx, t, "helm", helm)
			availableIn(ctx, t, a, own.GetNamespace())
			before, err := a.Get(ctx, helm)
			if err != nil {
				t.Fatal(err)
			}
			untouched := func(when string) {
				t.Helper()
				now, err := a.Get(ctx, helm)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if now.GetUID() != before.GetUID() || !same(before, now) || appliedByBootstrap(now) {
					t.Errorf("%s: Helm's Flagger changed: %s", when, diff(strip(before), strip(now), ""))
				}
			}

			plain := takeOver
			plain.Replace = nil
			if _, err := Apply(ctx, a, plain, false); !apierrors.IsInvalid(err) {
				t.Errorf("without taking over: %v, want the server's refusal", err)
			}
			if _, err := Check(ctx, a, plain); !apierrors.IsInvalid(err) {
				t.Errorf("check without taking over: %v, want the server's refusal", err)
			}
			untouched("without taking over")

			fs, err := Check(ctx, a, takeOver)
			if err != nil {
				t.Fatal(err)
			}
			want := []Finding{{Cluster: "us", Object: RefOf(own), State: Outdated,
				Detail: "another installer's, which the server refuses to change in place: bootstrap would replace it"}}
			if diff := cmp.Diff(want, fs); diff != "" {
				t.Errorf("check (-want +got)\n%s", diff)
			}
			rs, err := Apply(ctx, a, takeOver, true)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Action{WouldReplace}, actions(rs)); diff != "" {
				t.Errorf("dry run (-want +got)\n%s", diff)
			}
			untouched("dry run")

			rs, err = Apply(ctx, a, takeOver, false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Action{Replaced}, actions(rs)); diff != "" {
				t.Errorf("taking over (-want +got)\n%s", diff)
			}
			got, err := a.Get(ctx, own)
			if err != nil {
				t.Fatal(err)
			}
			var managers []string
			for _, m := range got.GetManagedFields() {
				managers = append(managers, m.Manager)
			}
			if got.GetUID() == before.GetUID() || !appliedByBootstrap(got) || slices.Contains(managers, "helm") {
				t.Errorf("taking over: the Deployment is not bootstrap's alone (managers %v)", managers)
			}
			for _, field := range []string{"selector", "strategy"} {
				wantF, _, _ := unstructured.NestedFieldNoCopy(own.Object, "spec", field)
				gotF, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", field)
				if diff := cmp.Diff(wantF, gotF); diff != "" {
					t.Errorf("taking over: spec.%s (-bootstrap's +got)\n%s", field, diff)
				}
			}

			// The Deployment controller annotates a new Deployment with its
			// revision a moment later; apply compares annotations too.
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err = a.Get(ctx, own)
				return got != nil && got.GetAnnotations()["deployment.kubernetes.io/revision"] != "", err
			})
			if err != nil {
				t.Fatalf("waiting for the revision of bootstrap's Deployment: %v", err)
			}
			rs, err = Apply(ctx, a, takeOver, false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Action{Unchanged}, actions(rs)); diff != "" {
				t.Errorf("after taking over (-want +got)\n%s", diff)
			}
			// Bootstrap's own Deployment is never replaced, even where the
			// server refuses a change.
			changed := takeOver
			changed.Objects = []*unstructured.Unstructured{withSelector(t, own.DeepCopy(), map[string]any{"app": "flagger-changed"})}
			if _, err := Apply(ctx, a, changed, false); !apierrors.IsInvalid(err) {
				t.Errorf("a refused change to bootstrap's Deployment: %v, want the server's refusal", err)
			}
			if now, err := a.Get(ctx, own); err != nil || now.GetUID() != got.GetUID() {
				t.Errorf("bootstrap replaced its own Deployment (%v)", err)
			}
		})
	}
}

// A Deployment to replace that does not go (a finalizer holds it) fails the
// take-over at the deadline, naming it; nothing is created in its place.
func TestTakeOverStuck(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	a := clusterAs(t, FieldManager)
	takeOver := takeOverTarget(ctx, t)
	helm := helmAt(t, takeOver.Objects[0])
	helm.SetFinalizers([]string{"test.flotilla.dev/hold"})
	applyAs(ctx, t, "helm", helm)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		released := helm.DeepCopy()
		released.SetFinalizers(nil)
		if _, err := clusterAs(t, "helm").ApplyObject(ctx, released, false); err != nil {
			t.Errorf("removing the finalizer: %v", err)
		}
	})

	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := Apply(short, a, takeOver, false)
	if err == nil || !strings.Contains(err.Error(), "waiting for "+RefOf(helm).String()+" to be deleted") {
		t.Errorf("%v, want the Deployment named", err)
	}
	now, err := a.Get(ctx, helm)
	if err != nil || appliedByBootstrap(now) || now.GetDeletionTimestamp() == nil {
		t.Errorf("Helm's Flagger, held: %v, want it deleting and not bootstrap's", err)
	}
}
