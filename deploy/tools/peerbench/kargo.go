package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// Kargo's control plane runs on one management API server: the fleet's
// first cluster (c1), which is also a target (a Kargo Stage applies nothing
// itself without Argo CD: each cluster's Flux source- and
// kustomize-controller apply what its promotions push to git).
const (
	// kargoProject is the Project (and its namespace on the management
	// cluster) of both Kargo subjects.
	kargoProject = "kargo-peerbench"
	// kargoNamespace is KARGO_NAMESPACE, the chart's release namespace.
	kargoNamespace = "kargo"
	// kargoReceiver is the ProjectConfig's generic webhook receiver, and
	// kargoReceiverSecret its Secret (the key `secret` is the receiver's
	// secret, which its path hashes).
	kargoReceiver       = "registry"
	kargoReceiverSecret = "registry-webhook"
	// kargoWarehouseInterval is the Warehouse's default interval (its CRD's
	// default, 5m0s): the polling subject's only way to find a push.
	kargoWarehouseInterval = 5 * time.Minute
)

// kargoComponents are the control plane's processes the bench runs, as
// the chart runs them (each a subcommand of the one binary): the controller
// (Warehouses, Stages, Promotions), the management controller (Projects,
// ProjectConfigs: it writes the webhook receivers' paths to the
// ProjectConfig's status), the external webhooks server (it serves those
// receivers) and the Kubernetes webhooks server (its defaulting webhook
// fills a Promotion's steps from its Stage: auto-promotion creates minimal
// Promotions and relies on it). Not run: the api server (the UI's and CLI's
// backend; the bench writes the resources itself), the garbage collector
// (old Promotions and Freight) and Dex.
var kargoComponents = []string{"kubernetes-webhooks-server", "external-webhooks-server", "management-controller", "controller"}

// kargoSet is the management cluster's Kargo control plane.
type kargoSet struct {
	procs []*proc.Proc
	// external is the external webhooks server's address (the webhook
	// receivers').
	external string
	// secret is the generic receiver's secret.
	secret string
}

func kargoBinary(dir string) string { return filepath.Join(dir, "kargo-"+KargoVersion) }

// checkKargo tells whether Kargo's binary or CRDs are missing.
func checkKargo(dir string) error {
	for _, p := range []string{kargoBinary(dir), kargoBinary(dir) + "-crds"} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("no Kargo %s (make peers-build): %w", KargoVersion, err)
		}
	}
	return nil
}

// installKargoCRDs applies the chart's CRDs (copied by build.sh) and the
// chart's namespaces to the management cluster.
func installKargoCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	ap, err := kube.NewApplier(cfg, "peerbench")
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(kargoBinary(dir)+"-crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s-crds", kargoBinary(dir))
	}
	sort.Strings(files)
	names, err := applyFiles(ctx, ap, files)
	if err != nil {
		return err
	}
	for _, ns := range []string{kargoNamespace, "kargo-system-resources", "kargo-shared-resources", "kargo-cluster-secrets"} {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
		if err := ap.Apply(ctx, o); err != nil {
			return err
		}
	}
	return kube.WaitCRDsEstablished(ctx, cfg, names...)
}

// kargoEnv is the environment every component gets from the chart's
// ConfigMaps, at the chart's defaults.
func kargoEnv(kubeconfig, tmp string) []string {
	return []string{"KUBECONFIG=" + kubeconfig, "TMPDIR=" + tmp, "LOG_LEVEL=INFO", "LOG_FORMAT=console",
		"KARGO_NAMESPACE=" + kargoNamespace, "SYSTEM_RESOURCES_NAMESPACE=kargo-system-resources",
		"SHARED_RESOURCES_NAMESPACE=kargo-shared-resources", "CLUSTER_SECRETS_NAMESPACE=kargo-cluster-secrets",
		"METRICS_BIND_ADDRESS=0"}
}

// startKargo installs Kargo's CRDs and admission webhooks on the
// management cluster and starts its control plane out of cluster with the
// cluster's kubeconfig. What is not the chart's default, and why:
//   - every listener on a loopback port (the chart's Services);
//   - the Kubernetes webhooks server's certificate: a self-signed one for
//     127.0.0.1 (the chart has cert-manager issue one for its Service), in
//     controller-runtime's default certificate directory under its TMPDIR;
//     the webhook configurations (the chart's webhooks.yaml, the Kargo
//     resources' rules) call it by URL with that CA;
//   - CONTROLPLANE_USER_REGEX `.*`: every component, and the bench, use
//     the cluster's one admin kubeconfig, where the chart gives each its
//     service account (the regex names those);
//   - MANAGE_CONTROLLER_ROLE_BINDINGS=false: the controller needs no
//     RoleBindings in the Project's namespace with that kubeconfig;
//   - ARGOCD_INTEGRATION_ENABLED and ROLLOUTS_INTEGRATION_ENABLED false:
//     neither Argo CD nor Argo Rollouts runs here (the chart enables them
//     and Kargo then waits for their CRDs).
func startKargo(ctx context.Context, dir, binDir, kubeconfig string, cfg *rest.Config) (*kargoSet, error) {
	ks := &kargoSet{secret: randomHex(16)}
	if err := installKargoCRDs(ctx, cfg, binDir); err != nil {
		return ks, fmt.Errorf("installing Kargo's CRDs: %w", err)
	}
	var err error
	if ks.external, err = proc.FreeAddr(ctx); err != nil {
		return ks, err
	}
	webhooks, err := proc.FreeAddr(ctx)
	if err != nil {
		return ks, err
	}
	for _, c := range kargoComponents {
		cdir := filepath.Join(dir, c)
		tmp := filepath.Join(cdir, "tmp")
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return ks, err
		}
		env := kargoEnv(kubeconfig, tmp)
		var ca []byte
		switch c {
		case "kubernetes-webhooks-server":
			if ca, err = writeServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs")); err != nil {
				return ks, err
			}
			env = append(env, "WEBHOOK_SERVER_PORT="+port(webhooks), "CONTROLPLANE_USER_REGEX=.*",
				"MANAGEMENT_CONTROLLER_USERNAME=", "EXTERNAL_WEBHOOKS_SERVER_USERNAME=", "CACHE_BY_TAG_POLICY=Allow")
		case "external-webhooks-server":
			host, p, _ := net.SplitHostPort(ks.external)
			env = append(env, "BIND_ADDRESS="+host, "PORT="+p, "EXTERNAL_WEBHOOK_SERVER_BASE_URL=http://"+ks.external)
		case "management-controller":
			env = append(env, "EXTERNAL_WEBHOOK_SERVER_BASE_URL=http://"+ks.external, "MANAGE_CONTROLLER_ROLE_BINDINGS=false")
		case "controller":
			env = append(env, "IS_DEFAULT_CONTROLLER=true", "ALLOW_CREDENTIALS_OVER_HTTP=false",
				"GITCLIENT_NAME=Kargo", "GITCLIENT_EMAIL=no-reply@kargo.io", "GIT_PUSH_INTEGRATION_POLICY=AlwaysRebase",
				"ARGOCD_INTEGRATION_ENABLED=false", "ROLLOUTS_INTEGRATION_ENABLED=false", "HOME="+cdir)
		}
		argv := append(append([]string{"/usr/bin/env"}, env...), kargoBinary(binDir), c)
		p, err := proc.Start(ctx, "kargo-"+c, filepath.Join(cdir, c+".log"), argv...)
		if err != nil {
			return ks, err
		}
		ks.procs = append(ks.procs, p)
		switch c {
		case "kubernetes-webhooks-server":
			if err := waitTLS(ctx, webhooks, 90*time.Second); err != nil {
				return ks, fmt.Errorf("kargo %s: %w", c, err)
			}
			if err := registerKargoWebhooks(ctx, cfg, "https://"+webhooks, ca); err != nil {
				return ks, err
			}
		case "external-webhooks-server":
			if err := p.WaitHTTP(ctx, "http://"+ks.external+"/healthz", 90*time.Second); err != nil {
				return ks, fmt.Errorf("kargo %s: %w", c, err)
			}
		}
	}
	return ks, nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func (ks *kargoSet) stop() {
	for i := len(ks.procs) - 1; i >= 0; i-- {
		ks.procs[i].Stop(10 * time.Second)
	}
}

func (ks *kargoSet) pids() []int {
	var out []int
	for _, p := range ks.procs {
		out = append(out, p.Pid())
	}
	return out
}

// kargoReceiverPath is where the external webhooks server serves the
// project's generic receiver: /generic/ and the SHA-256 of the project's
// name, the receiver's and its secret (Kargo's buildWebhookPath; the
// management controller writes the same path to the ProjectConfig's
// status, which the bench checks).
func kargoReceiverPath(project, receiver, secret string) string {
	return fmt.Sprintf("/generic/%x", sha256.Sum256([]byte(project+receiver+secret)))
}

// writeServingCert writes a self-signed certificate for 127.0.0.1 as
// tls.crt and tls.key in dir and returns it (PEM), the webhooks' CA.
func writeServingCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kargo-webhooks-server"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	return crt, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// waitTLS waits until addr accepts a TLS handshake.
func waitTLS(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only that it serves
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving TLS at %s after %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kargoWebhook is one of the chart's admission webhooks (webhooks.yaml):
// the Kargo resources' defaulting and validating webhooks.
type kargoWebhook struct {
	kind, resource string
	mutate         bool
}

var kargoWebhooks = []kargoWebhook{
	{"freight", "freights", true}, {"promotion", "promotions", true}, {"stage", "stages", true}, {"warehouse", "warehouses", true},
	{"clusterconfig", "clusterconfigs", false}, {"clusterpromotiontask", "clusterpromotiontasks", false},
	{"freight", "freights", false}, {"project", "projects", false}, {"projectconfig", "projectconfigs", false},
	{"promotion", "promotions", false}, {"promotiontask", "promotiontasks", false}, {"stage", "stages", false},
	{"warehouse", "warehouses", false},
}

// registerKargoWebhooks creates the chart's Mutating- and
// ValidatingWebhookConfiguration `kargo`, calling base by URL with ca.
func registerKargoWebhooks(ctx context.Context, cfg *rest.Config, base string, ca []byte) error {
	ap, err := kube.NewApplier(cfg, "peerbench")
	if err != nil {
		return err
	}
	var mut, val []any
	for _, w := range kargoWebhooks {
		verb, ops := "validate", []any{"CREATE", "UPDATE"}
		if w.mutate {
			verb = "mutate"
		}
		scope := "Namespaced"
		switch w.resource {
		case "clusterconfigs", "clusterpromotiontasks", "projects":
			scope = "Cluster"
		}
		resources := []any{w.resource}
		if !w.mutate && (w.kind == "freight" || w.kind == "promotion") {
			ops = append(ops, "DELETE")
			if w.kind == "freight" {
				resources = append(resources, "freights/status")
			}
		}
		hook := map[string]any{
			"name": w.kind + ".kargo.akuity.io", "admissionReviewVersions": []any{"v1"}, "sideEffects": "None", "failurePolicy": "Fail",
			"clientConfig": map[string]any{"url": base + "/" + verb + "-kargo-akuity-io-v1alpha1-" + w.kind, "caBundle": base64.StdEncoding.EncodeToString(ca)},
			"rules": []any{map[string]any{"scope": scope, "apiGroups": []any{"kargo.akuity.io"}, "apiVersions": []any{"v1alpha1"},
				"resources": resources, "operations": ops}},
		}
		if w.mutate {
			mut = append(mut, hook)
		} else {
			val = append(val, hook)
		}
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": map[string]any{"name": "kargo"}, "webhooks": mut}},
		{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": "kargo"}, "webhooks": val}},
	}
	return ap.Apply(ctx, objs...)
}

// kargoWaves are the clusters of a subject's Stages: one Stage per wave of
// flotilla's waves subject ([c1] then [c2..cN]).
func kargoWaves(clusters []string) [][]string {
	return [][]string{clusters[:1], clusters[1:]}
}

// kargoStageName names a subject's Stage for a wave (0: the first).
func kargoStageName(s *subject, wave int) string { return fmt.Sprintf("%s-wave-%d", s.ns, wave+1) }

// kargoObjects are the Project's objects on the management cluster, as
// Kargo's quickstart and docs configure them, for every Kargo subject:
//   - the Project's ProjectConfig: a promotion policy enabling
//     auto-promotion of every Stage, and (webhook subject) a generic
//     webhook receiver whose Refresh action refreshes the Warehouses whose
//     subscribedURLs index holds the pushed repository (the registry's
//     host and the event's repository, normalized as Kargo normalizes a
//     subscription's): Kargo has no receiver for CNCF distribution's
//     notifications;
//   - a Warehouse per subject subscribed to its repository (SemVer, the
//     default strategy; its default interval);
//   - a Stage per wave: the first requests Freight from the Warehouse, the
//     next from the Stage before it; each promotes with git-clone,
//     kustomize-set-image (the image of the Freight) of each of its
//     clusters' directories, git-commit and git-push to the deployments
//     repository.
func kargoObjects(subs []*subject, clusters []string, gitURL, secret string) []*unstructured.Unstructured {
	meta := func(name string) map[string]any { return map[string]any{"name": name, "namespace": kargoProject} }
	obj := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kargo.akuity.io/v1alpha1", "kind": kind, "metadata": meta(name), "spec": spec}}
	}
	var objs, warehouses []*unstructured.Unstructured
	var policies []any
	webhook := false
	for _, s := range subs {
		if s.tool != "kargo" {
			continue
		}
		webhook = webhook || !s.poll
		repo := s.reg.host + "/" + s.repo
		warehouses = append(warehouses, obj("Warehouse", s.ns, map[string]any{
			"subscriptions": []any{map[string]any{"image": map[string]any{"repoURL": repo, "constraint": ">=1.0.0"}}},
		}))
		for i, wave := range kargoWaves(clusters) {
			name := kargoStageName(s, i)
			sources := map[string]any{"direct": true}
			if i > 0 {
				sources = map[string]any{"stages": []any{kargoStageName(s, i-1)}}
			}
			steps := []any{map[string]any{"uses": "git-clone", "config": map[string]any{
				"repoURL": gitURL, "checkout": []any{map[string]any{"branch": "main", "path": "./src"}},
			}}}
			for _, c := range wave {
				steps = append(steps, map[string]any{"uses": "kustomize-set-image", "config": map[string]any{
					"path": "./src/" + fluxPath(s.ns, c), "images": []any{map[string]any{"image": repo, "tag": "${{ imageFrom(\"" + repo + "\").Tag }}"}},
				}})
			}
			steps = append(steps,
				map[string]any{"uses": "git-commit", "config": map[string]any{"path": "./src", "message": "promote " + repo + " to " + name}},
				map[string]any{"uses": "git-push", "config": map[string]any{"path": "./src"}})
			objs = append(objs, obj("Stage", name, map[string]any{
				"requestedFreight":  []any{map[string]any{"origin": map[string]any{"kind": "Warehouse", "name": s.ns}, "sources": sources}},
				"promotionTemplate": map[string]any{"spec": map[string]any{"steps": steps}},
			}))
			policies = append(policies, map[string]any{"stageSelector": map[string]any{"name": name}, "autoPromotionEnabled": true})
		}
	}
	spec := map[string]any{"promotionPolicies": policies}
	head := []*unstructured.Unstructured{}
	if webhook {
		head = append(head, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": meta(kargoReceiverSecret),
			"data": map[string]any{"secret": base64.StdEncoding.EncodeToString([]byte(secret))},
		}})
		const ev = "request.body.events[0]"
		spec["webhookReceivers"] = []any{map[string]any{"name": kargoReceiver, "generic": map[string]any{
			"secretRef": map[string]any{"name": kargoReceiverSecret},
			"actions": []any{map[string]any{
				"action":         "Refresh",
				"whenExpression": ev + `.action == "push"`,
				"targetSelectionCriteria": []any{map[string]any{"kind": "Warehouse", "indexSelector": map[string]any{
					"matchIndices": []any{map[string]any{"key": "subscribedURLs", "operator": "Equals",
						"value": "${{ normalizeImage(" + ev + `.request.host + "/" + ` + ev + ".target.repository) }}"}},
				}}},
			}},
		}}}
	}
	head = append(head, obj("ProjectConfig", kargoProject, spec))
	return append(append(head, warehouses...), objs...)
}

var kargoProjectConfigGVR = schema.GroupVersionResource{Group: "kargo.akuity.io", Version: "v1alpha1", Resource: "projectconfigs"}

// applyKargoObjects creates the Project, waits for its namespace (the
// management controller makes it), creates the subjects' objects and
// waits until the ProjectConfig's status serves the receiver at the path
// the registry notifies.
func (b *bench) applyKargoObjects(ctx context.Context) error {
	c, _ := b.fleet.Cluster(b.names[0])
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	ap, err := kube.NewApplier(cfg, "peerbench")
	if err != nil {
		return err
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Project", "metadata": map[string]any{"name": kargoProject},
	}}
	if err := ap.Apply(ctx, project); err != nil {
		return fmt.Errorf("creating Kargo's Project: %w", err)
	}
	if err := b.waitNamespace(ctx, b.names[0], kargoProject, time.Minute); err != nil {
		return fmt.Errorf("Kargo's Project's namespace: %w", err)
	}
	if err := ap.Apply(ctx, kargoObjects(b.subs, b.names, b.git.url, b.kargo.secret)...); err != nil {
		return fmt.Errorf("creating Kargo's objects: %w", err)
	}
	if !b.kargoWebhook() {
		return nil
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	want := kargoReceiverPath(kargoProject, kargoReceiver, b.kargo.secret)
	deadline := time.Now().Add(time.Minute)
	for {
		pc, err := dc.Resource(kargoProjectConfigGVR).Namespace(kargoProject).Get(ctx, kargoProject, metav1.GetOptions{})
		if err == nil {
			rs, _, _ := unstructured.NestedSlice(pc.Object, "status", "webhookReceivers")
			for _, r := range rs {
				if m, ok := r.(map[string]any); ok && m["path"] == want {
					return nil
				}
			}
			if len(rs) > 0 {
				return fmt.Errorf("Kargo's ProjectConfig serves its receiver at %v, the registry notifies %s", rs, want)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Kargo's ProjectConfig has no webhook receiver after a minute (%v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kargoWebhook tells whether the run has Kargo's webhook subject.
func (b *bench) kargoWebhook() bool {
	for _, s := range b.subs {
		if s.tool == "kargo" && !s.poll {
			return true
		}
	}
	return false
}

// waitNamespace waits until a namespace exists in a cluster.
func (b *bench) waitNamespace(ctx context.Context, cluster, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := b.kube[cluster].CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("no namespace %s in %s after %s", ns, cluster, timeout), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
