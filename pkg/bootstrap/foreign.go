package bootstrap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Who installed a Flagger bootstrap did not (Foreign.Installer).
const (
	InstallerHelm  = "Helm"
	InstallerFlux  = "Flux"
	InstallerOther = "another installer"
)

// The labels and annotations that say who installed an object: Helm's,
// and those Flux's helm-controller and kustomize-controller add.
const (
	helmManagedBy        = "app.kubernetes.io/managed-by"
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	fluxHelmName         = "helm.toolkit.fluxcd.io/name"
	fluxHelmNamespace    = "helm.toolkit.fluxcd.io/namespace"
	fluxKustomizeName    = "kustomize.toolkit.fluxcd.io/name"
	fluxKustomizeNS      = "kustomize.toolkit.fluxcd.io/namespace"
)

// Foreign is a Flagger controller bootstrap did not install.
type Foreign struct {
	// Deployment runs it.
	Deployment Ref
	// Image is its container's image.
	Image string
	// Version is the image's tag read as a semantic version ("1.42.0");
	// "" when the image names none (a digest only, no tag, "latest").
	Version string
	// Installer is InstallerHelm, InstallerFlux or InstallerOther.
	Installer string
	// Source names what installed it when its labels say: "release
	// flagger in flagger" (Helm), "HelmRelease flux-system/flagger" or
	// "Kustomization flux-system/infra" (Flux); else "".
	Source string
	// Available tells whether the Deployment has an available replica of
	// its current generation.
	Available bool
}

// String is, for instance, "Flagger 1.42.0 installed by Helm (release
// flagger in flagger, Deployment flagger/flagger)".
func (f Foreign) String() string {
	where := "Deployment " + f.Deployment.Namespace + "/" + f.Deployment.Name
	if f.Source != "" {
		where = f.Source + ", " + where
	}
	return fmt.Sprintf("Flagger %s installed by %s (%s)", cmp.Or(f.Version, "of unknown version"), f.Installer, where)
}

// Lister lists a kind's objects in every namespace: pkg/kube's Applier.
type Lister interface {
	List(ctx context.Context, apiVersion, kind string) ([]unstructured.Unstructured, error)
}

// FindForeign lists the Flaggers of a cluster that bootstrap did not
// install (ForeignFlagger).
func FindForeign(ctx context.Context, l Lister) ([]Foreign, error) {
	ds, err := l.List(ctx, "apps/v1", "Deployment")
	if err != nil {
		return nil, fmt.Errorf("looking for Flagger: %w", err)
	}
	var out []Foreign
	for i := range ds {
		if f, ok := ForeignFlagger(&ds[i]); ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// ForeignFlagger tells whether the Deployment d runs a Flagger bootstrap
// did not install, and reads what it is. d runs Flagger when a container's
// image repository ends in /flagger (ghcr.io/fluxcd/flagger or a mirror).
// bootstrap installed it when server-side apply recorded FieldManager in
// its managedFields (wherever it runs, whatever its labels): a Flagger
// bootstrap applied over with --manage-flagger is bootstrap's from then on.
func ForeignFlagger(d *unstructured.Unstructured) (Foreign, bool) {
	image, ok := flaggerImage(d)
	if !ok || appliedByBootstrap(d) {
		return Foreign{}, false
	}
	installer, source := installedBy(d)
	return Foreign{
		Deployment: RefOf(d),
		Image:      image,
		Version:    imageVersion(image),
		Installer:  installer,
		Source:     source,
		Available:  available(d),
	}, true
}

// appliedByBootstrap tells whether bootstrap's field manager owns fields
// of o.
func appliedByBootstrap(o *unstructured.Unstructured) bool {
	return slices.ContainsFunc(o.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool { return m.Manager == FieldManager })
}

// flaggerImage is the image of d's first container that runs Flagger.
func flaggerImage(d *unstructured.Unstructured) (string, bool) {
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		image, _ := m["image"].(string)
		if repo, _, _ := splitImage(image); strings.HasSuffix(repo, "/flagger") {
			return image, true
		}
	}
	return "", false
}

// splitImage splits an image reference into its repository, tag and
// digest, each "" when absent.
func splitImage(image string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(image, "@")
	// A colon after the last slash starts the tag; one before it is a
	// registry's port.
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// imageVersion reads an image's tag as a semantic version ("v1.42.0" is
// "1.42.0"); "" when it has no tag or the tag is not a version.
func imageVersion(image string) string {
	_, tag, _ := splitImage(image)
	if tag == "" {
		return ""
	}
	v, err := semver.NewVersion(tag)
	if err != nil {
		return ""
	}
	return v.String()
}

// installedBy reads who installed d from its labels and annotations: Flux
// first (its helm-controller's objects carry Helm's marks too), then Helm.
func installedBy(d *unstructured.Unstructured) (installer, source string) {
	get := func(key string) string {
		return cmp.Or(d.GetLabels()[key], d.GetAnnotations()[key])
	}
	qualified := func(namespace, name string) string {
		if namespace == "" {
			return name
		}
		return namespace + "/" + name
	}
	switch {
	case get(fluxHelmName) != "":
		return InstallerFlux, "HelmRelease " + qualified(get(fluxHelmNamespace), get(fluxHelmName))
	case get(fluxKustomizeName) != "":
		return InstallerFlux, "Kustomization " + qualified(get(fluxKustomizeNS), get(fluxKustomizeName))
	case get(helmReleaseName) != "":
		return InstallerHelm, "release " + get(helmReleaseName) + " in " + cmp.Or(get(helmReleaseNamespace), d.GetNamespace())
	case strings.EqualFold(get(helmManagedBy), "Helm"):
		return InstallerHelm, ""
	default:
		return InstallerOther, ""
	}
}

// WithoutFlagger is t without Flagger's own objects (FlaggerObjects): what
// bootstrap applies to a cluster where a Flagger it did not install runs.
func (t Target) WithoutFlagger() Target {
	t.Objects = slices.DeleteFunc(slices.Clone(t.Objects), func(o *unstructured.Unstructured) bool {
		return slices.Contains(t.FlaggerObjects, RefOf(o))
	})
	t.FlaggerObjects = nil
	return t
}

// TakeOver is t for --manage-flagger: bootstrap applies its Flagger over
// one it did not install, and replaces that one's Deployment when it stands
// where bootstrap's goes and the server refuses to change it in place (its
// selector is immutable; its strategy keeps another manager's rollingUpdate
// beside bootstrap's Recreate). Flagger's CRDs are never replaced: deleting
// one deletes every canary.
func (t Target) TakeOver() Target {
	t.Replace = nil
	for _, r := range t.FlaggerObjects {
		if r.Kind == "Deployment" {
			t.Replace = append(t.Replace, r)
		}
	}
	return t
}

// replaceable tells whether cur, the object an apply was refused on with
// err, is a Flagger bootstrap did not install (ForeignFlagger) and err
// refuses a change the object cannot take in place: an immutable field, or
// the Deployment's strategy.
func replaceable(cur *unstructured.Unstructured, err error) bool {
	var st apierrors.APIStatus
	if _, ok := ForeignFlagger(cur); !ok || !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(st.Status().Details.Causes, func(c metav1.StatusCause) bool {
		return strings.Contains(c.Message, "field is immutable") || strings.HasPrefix(c.Field, "spec.strategy")
	})
}

// flaggerCRDs are Flagger's CRDs among t's objects.
func (t Target) flaggerCRDs() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range t.Objects {
		if o.GetKind() == "CustomResourceDefinition" && slices.Contains(t.FlaggerObjects, RefOf(o)) {
			out = append(out, o)
		}
	}
	return out
}

// LeaveAlone is what bootstrap applies to t's cluster, where a Flagger it
// did not install runs: t without Flagger's own objects. flotilla's
// canaries need Flagger's CRDs, and bootstrap does not apply them over
// another installer's Flagger: when some are missing, LeaveAlone fails
// naming them. It changes nothing.
func LeaveAlone(ctx context.Context, a Applier, t Target) (Target, error) {
	var missing []string
	for _, crd := range t.flaggerCRDs() {
		_, err := a.Get(ctx, crd)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, crd.GetName())
		case err != nil:
			return t, fmt.Errorf("cluster %s: reading %s: %w", t.Name, RefOf(crd), err)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("cluster %s: Flagger's CRDs are missing (%s): bootstrap does not apply them over a Flagger it did not install; install them with that Flagger",
			t.Name, strings.Join(missing, ", "))
	}
	return t.WithoutFlagger(), nil
}

// CheckForeign is Check for t's cluster, where the Flaggers fs, which
// bootstrap did not install, run: each one judged by JudgeForeign, never
// compared with bootstrap's Flagger; Flagger's CRDs there or Missing (not
// compared either: they are that Flagger's); the rest of t as Check
// compares it.
func CheckForeign(ctx context.Context, a Applier, t Target, fs []Foreign) ([]Finding, error) {
	out := make([]Finding, 0, len(fs)+len(t.Objects))
	for _, f := range fs {
		out = append(out, JudgeForeign(t.Name, f))
	}
	for _, crd := range t.flaggerCRDs() {
		fd := Finding{Cluster: t.Name, Object: RefOf(crd), State: OK}
		_, err := a.Get(ctx, crd)
		switch {
		case apierrors.IsNotFound(err):
			fd.State, fd.Detail = Missing, "the Flagger there needs it; bootstrap does not apply it over a Flagger it did not install"
		case err != nil:
			return out, fmt.Errorf("cluster %s: reading %s: %w", t.Name, fd.Object, err)
		}
		out = append(out, fd)
	}
	rest, err := Check(ctx, a, t.WithoutFlagger())
	return append(out, rest...), err
}

// JudgeForeign is fleet check's verdict on a Flagger bootstrap did not
// install: older than FlaggerVersion is Outdated; the same, newer, or a
// version the image does not tell is OK, with a Detail saying which; then
// a Flagger with no available replica is NotReady. Its Deployment is not
// compared with bootstrap's: another installer's settings are not drift.
func JudgeForeign(cluster string, f Foreign) Finding {
	fd := Finding{Cluster: cluster, Object: f.Deployment, State: OK}
	what := fmt.Sprintf("Flagger %s (installed by %s)", f.Version, f.Installer)
	switch c, ok := compareVersions(f.Version, FlaggerVersion); {
	case !ok:
		fd.Detail = fmt.Sprintf("Flagger (installed by %s): its version cannot be read from its image %s; flotilla is tested with %s", f.Installer, f.Image, FlaggerVersion)
	case c < 0:
		fd.State, fd.Detail = Outdated, what+", older than the tested "+FlaggerVersion
	case c == 0:
		fd.Detail = what + ", the tested version"
	default:
		fd.Detail = what + ", newer than the tested " + FlaggerVersion
	}
	if !f.Available {
		if fd.State == OK {
			fd.State = NotReady
		}
		fd.Detail += "; no available replica yet"
	}
	return fd
}

// compareVersions compares two semantic versions (-1, 0, 1); ok is false
// when either is not one.
func compareVersions(a, b string) (int, bool) {
	va, err := semver.NewVersion(a)
	if err != nil {
		return 0, false
	}
	vb, err := semver.NewVersion(b)
	if err != nil {
		return 0, false
	}
	return va.Compare(vb), true
}
