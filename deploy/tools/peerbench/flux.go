package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// fluxController is one of Flux's controllers as deploy/tools/peers/build.sh
// builds it: the binary NAME-VERSION and its CRDs in NAME-VERSION-crds.
type fluxController struct{ name, version string }

// fluxControllers are the Flux controllers the side by side runs in every
// cluster, at the versions build.sh pins (Flux 2.9's).
var fluxControllers = []fluxController{
	{"source-controller", "1.9.3"},
	{"kustomize-controller", "1.9.4"},
	{"image-reflector-controller", "1.2.0"},
	{"image-automation-controller", "1.2.1"},
	{"notification-controller", "1.9.3"},
}

// Flux's intervals, as its guides set them (Flux has no default for most:
// the fields are required):
//   - fluxImageInterval: the ImageRepository's scan, the image update
//     guide's `flux create image repository --interval=5m`; the only way the
//     polling subject finds a push;
//   - fluxGitInterval: the GitRepository's fetch, `flux bootstrap`'s 1m;
//   - fluxKustomizeInterval: the Kustomization's, bootstrap's 10m (a new
//     source revision reconciles it at once, whatever the interval);
//   - fluxAutomationInterval: the ImageUpdateAutomation's, the guide's 30m
//     (a new latest image of its ImagePolicies runs it at once).
const (
	fluxImageInterval      = 5 * time.Minute
	fluxGitInterval        = "1m"
	fluxKustomizeInterval  = "10m"
	fluxAutomationInterval = "30m"
	// fluxNamespace is the controllers' RUNTIME_NAMESPACE, as their
	// manifests set it (flux-system).
	fluxNamespace = "flux-system"
)

// fluxSet is one cluster's Flux: its five controllers, run out of cluster
// with the cluster's kubeconfig (KUBECONFIG, which controller-runtime
// reads), as `flux install` would run them in it.
type fluxSet struct {
	cluster  string
	procs    []*proc.Proc
	receiver string // the notification-controller's receiver address
}

// fluxBinary is a controller's binary in dir.
func fluxBinary(dir string, c fluxController) string {
	return filepath.Join(dir, c.name+"-"+c.version)
}

// checkFlux tells which of Flux's binaries or CRDs is missing.
func checkFlux(dir string) error {
	for _, c := range fluxControllers {
		for _, p := range []string{fluxBinary(dir, c), fluxBinary(dir, c) + "-crds"} {
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("no Flux %s %s (make peers-build): %w", c.name, c.version, err)
			}
		}
	}
	return nil
}

// installFluxCRDs applies every controller's CRDs (config/crd/bases of its
// source, copied by build.sh) and waits until they are established.
func installFluxCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	ap, err := kube.NewApplier(cfg, "peerbench")
	if err != nil {
		return err
	}
	var names []string
	for _, c := range fluxControllers {
		files, err := filepath.Glob(filepath.Join(fluxBinary(dir, c)+"-crds", "*.yaml"))
		if err != nil {
			return err
		}
		sort.Strings(files)
		applied, err := applyFiles(ctx, ap, files)
		if err != nil {
			return err
		}
		names = append(names, applied...)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": fluxNamespace},
	}}
	if err := ap.Apply(ctx, ns); err != nil {
		return err
	}
	return kube.WaitCRDsEstablished(ctx, cfg, names...)
}

// startFlux starts one cluster's Flux controllers, each with its listeners
// on loopback ports (every listener of Flux's controllers is a flag):
// --metrics-addr and --health-addr for all; the source-controller's
// artifact server (--storage-addr, and --storage-adv-addr, the address
// its artifacts' URLs carry, which the kustomize-controller downloads
// from: v1.9.3's own flags; v1.9.4 took fluxcd/pkg/artifact's
// --storage-address and --storage-adv-address instead);
// the notification-controller's --receiverAddr and --events-addr. Every
// other flag is the controller's default (all namespaces watched, no leader
// election: one replica each).
func startFlux(ctx context.Context, dir, binDir, cluster, kubeconfig string) (*fluxSet, error) {
	fs := &fluxSet{cluster: cluster}
	for _, c := range fluxControllers {
		cdir := filepath.Join(dir, c.name)
		// The storage directory too: source-controller v1.9.3 refuses a
		// --storage-path that does not exist.
		if err := os.MkdirAll(filepath.Join(cdir, "storage"), 0o755); err != nil {
			return fs, err
		}
		addrs := make([]string, 4)
		for i := range addrs {
			a, err := proc.FreeAddr(ctx)
			if err != nil {
				return fs, err
			}
			addrs[i] = a
		}
		metrics, health := addrs[0], addrs[1]
		argv := []string{"/usr/bin/env", "KUBECONFIG=" + kubeconfig, "RUNTIME_NAMESPACE=" + fluxNamespace, "TMPDIR=" + cdir,
			fluxBinary(binDir, c), "--metrics-addr=" + metrics, "--health-addr=" + health, "--log-encoding=console"}
		switch c.name {
		case "source-controller":
			argv = append(argv, "--storage-path="+filepath.Join(cdir, "storage"), "--storage-addr="+addrs[2], "--storage-adv-addr="+addrs[2])
		case "image-reflector-controller":
			argv = append(argv, "--storage-path="+filepath.Join(cdir, "storage"))
		case "notification-controller":
			fs.receiver = addrs[2]
			argv = append(argv, "--receiverAddr="+addrs[2], "--events-addr="+addrs[3])
		}
		p, err := proc.Start(ctx, c.name, filepath.Join(cdir, c.name+".log"), argv...)
		if err != nil {
			return fs, err
		}
		fs.procs = append(fs.procs, p)
		if err := p.WaitHTTP(ctx, "http://"+health+"/readyz", 90*time.Second); err != nil {
			return fs, fmt.Errorf("flux %s in %s: %w", c.name, cluster, err)
		}
	}
	return fs, nil
}

func (fs *fluxSet) stop() {
	for i := len(fs.procs) - 1; i >= 0; i-- {
		fs.procs[i].Stop(10 * time.Second)
	}
}

// receiverPath is the path the notification-controller serves a Receiver
// at: /hook/ and the SHA-256 of its token, name and namespace (the
// Receiver's status.webhookPath, Flux's GetWebhookPath).
func receiverPath(token, name, namespace string) string {
	d := sha256.Sum256([]byte(token + name + namespace))
	return "/hook/" + hex.EncodeToString(d[:])
}

// Receivers' names: one for the registry's webhook (the webhook subject
// only), one for the git host's push webhook (both).
const (
	fluxRegistryReceiver = "registry"
	fluxGitReceiver      = "git"
)

// fluxPath is where a subject's manifests for one cluster live in the
// deployments repository: one directory per cluster, like the clusters/
// directories of Flux's repository layouts, so that each cluster's image
// automation updates its own cluster's files.
func fluxPath(ns, cluster string) string { return ns + "/" + cluster }

// appliedByFlux tells whether a subject's workloads come from the
// deployments repository through each cluster's Flux: Flux's, and Kargo's
// (Kargo's promotions push to git; without Argo CD it applies nothing).
func appliedByFlux(s *subject) bool { return s.tool == "flux" || s.tool == "kargo" }

// fluxManifests are the repository's files for a subject in one cluster: the
// Deployment, without replicas (Flagger scales it; Flagger's Flux guide
// leaves replicas out so that Flux does not undo it), its image marked for
// the ImagePolicy's setter as the image update guide marks it (Flux's
// subjects; Kargo's kustomize-set-image writes the kustomization's images).
func fluxManifests(s *subject, cluster string) map[string]string {
	marker := ""
	if s.tool == "flux" {
		marker = fmt.Sprintf(` # {"$imagepolicy": "%s:%s"}`, s.ns, workload)
	}
	dep := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app: %[1]s
spec:
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: %[2]s
          image: %[3]s%[4]s
          ports:
            - name: http
              containerPort: 9898
`, workload, container, s.image(tag(firstVersion)), marker)
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deployment.yaml\n"
	p := fluxPath(s.ns, cluster)
	return map[string]string{p + "/deployment.yaml": dep, p + "/kustomization.yaml": kust}
}

// fluxObjects are a subject's Flux objects in one cluster's namespace:
//   - GitRepository `deploy` (the deployments repository, bootstrap's 1m)
//     and Kustomization `podinfo` applying the cluster's directory to the
//     namespace, pruning;
//   - ImageRepository, ImagePolicy (semver: the highest 1.x.y) and
//     ImageUpdateAutomation committing to main under the cluster's
//     directory (the Setters strategy), as the image update guide does;
//   - Receiver `git` (generic: the git host's push webhook) reconciling the
//     GitRepository; for the webhook subject, Receiver `registry` (generic:
//     the registry's notifications, whose format Flux has no type for)
//     reconciling the ImageRepository.
//
// A Kargo subject's namespaces get the GitRepository, the Kustomization
// and the `git` Receiver alone: Kargo's Stages write the repository.
func fluxObjects(s *subject, cluster, gitURL, token string) []*unstructured.Unstructured {
	ns := s.ns
	meta := func(name string) map[string]any { return map[string]any{"name": name, "namespace": ns} }
	obj := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta(name), "spec": spec}}
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": meta("webhook-token"),
		"data": map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(token))},
	}}
	gitReceiver := obj("notification.toolkit.fluxcd.io/v1", "Receiver", fluxGitReceiver, map[string]any{
		"type": "generic", "secretRef": map[string]any{"name": "webhook-token"},
		"resources": []any{map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "name": "deploy"}},
	})
	objs := []*unstructured.Unstructured{
		secret,
		obj("source.toolkit.fluxcd.io/v1", "GitRepository", "deploy", map[string]any{
			"interval": fluxGitInterval, "url": gitURL, "ref": map[string]any{"branch": "main"},
		}),
		obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", workload, map[string]any{
			"interval": fluxKustomizeInterval, "sourceRef": map[string]any{"kind": "GitRepository", "name": "deploy"},
			"path": "./" + fluxPath(ns, cluster), "prune": true, "targetNamespace": ns,
		}),
		gitReceiver,
	}
	if s.tool != "flux" {
		return objs
	}
	objs = append(objs,
		obj("image.toolkit.fluxcd.io/v1", "ImageRepository", workload, map[string]any{
			"image": s.reg.host + "/" + s.repo, "interval": fluxImageInterval.String(), "insecure": true,
		}),
		obj("image.toolkit.fluxcd.io/v1", "ImagePolicy", workload, map[string]any{
			"imageRepositoryRef": map[string]any{"name": workload},
			"policy":             map[string]any{"semver": map[string]any{"range": ">=1.0.0"}},
		}),
		obj("image.toolkit.fluxcd.io/v1", "ImageUpdateAutomation", workload, map[string]any{
			"interval":  fluxAutomationInterval,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "deploy"},
			"git": map[string]any{
				"checkout": map[string]any{"ref": map[string]any{"branch": "main"}},
				// The default commit message: a template changes nothing of the timing.
				"commit": map[string]any{
					"author": map[string]any{"name": "fluxcdbot", "email": "fluxcdbot@users.noreply.github.com"},
				},
				"push": map[string]any{"branch": "main"},
			},
			"update": map[string]any{"path": "./" + fluxPath(ns, cluster), "strategy": "Setters"},
		}))
	if !s.poll {
		objs = append(objs, obj("notification.toolkit.fluxcd.io/v1", "Receiver", fluxRegistryReceiver, map[string]any{
			"type": "generic", "secretRef": map[string]any{"name": "webhook-token"},
			"resources": []any{map[string]any{"apiVersion": "image.toolkit.fluxcd.io/v1", "kind": "ImageRepository", "name": workload}},
		}))
	}
	return objs
}

// fluxRepoFiles are the deployments repository's files: every Flux and
// Kargo subject's directory for every cluster.
func fluxRepoFiles(subs []*subject, clusters []string) map[string]string {
	files := map[string]string{"README.md": "Deployments of flotilla's peerbench (Flux and Kargo subjects), one directory per subject and cluster.\n"}
	for _, s := range subs {
		if !appliedByFlux(s) {
			continue
		}
		for _, c := range clusters {
			for p, content := range fluxManifests(s, c) {
				files[p] = content
			}
		}
	}
	return files
}

// applyFluxObjects creates every Flux and Kargo subject's Flux objects in
// every cluster.
func (b *bench) applyFluxObjects(ctx context.Context) error {
	for _, n := range b.names {
		c, _ := b.fleet.Cluster(n)
		cfg, err := c.RESTConfig()
		if err != nil {
			return err
		}
		ap, err := kube.NewApplier(cfg, "peerbench")
		if err != nil {
			return err
		}
		for _, s := range b.subs {
			if !appliedByFlux(s) {
				continue
			}
			if err := ap.Apply(ctx, fluxObjects(s, n, b.git.url, b.fluxToken)...); err != nil {
				return fmt.Errorf("creating %s's Flux objects in %s: %w", s.ns, n, err)
			}
		}
	}
	return nil
}

// fluxPIDs are every Flux controller's process ids.
func (b *bench) fluxPIDs() []int {
	var pids []int
	for _, f := range b.flux {
		for _, p := range f.procs {
			pids = append(pids, p.Pid())
		}
	}
	return pids
}

// fluxVersions lists the controllers and their versions, for the report.
func fluxVersions() string {
	var v []string
	for _, c := range fluxControllers {
		v = append(v, strings.TrimSuffix(c.name, "-controller")+" "+c.version)
	}
	return strings.Join(v, ", ")
}

// applyFiles applies the objects of each YAML file, in order, and returns
// their names (the CRDs to wait for).
func applyFiles(ctx context.Context, ap *kube.Applier, files []string) ([]string, error) {
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := kube.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := ap.Apply(ctx, objs...); err != nil {
			return nil, fmt.Errorf("applying %s: %w", f, err)
		}
		for _, o := range objs {
			names = append(names, o.GetName())
		}
	}
	return names, nil
}
