package features

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cucumber/godog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Clusters discovered (README "Clusters discovered"): Argo CD's cluster
// Secrets in a namespace of one cluster of the fleet, the management
// cluster, each naming another cluster of the fleet as Argo CD would
// (its server, token and CA).
func (s *scenario) registerDiscoverySteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla discovers clusters from Argo CD's cluster Secrets in cluster "([^"]*)" labelled "([^"]*)"$`, s.discoversArgoCD)
	sc.Step(`^an Argo CD cluster Secret for cluster "([^"]*)" labelled "([^"]*)" is created$`, s.argoSecretCreated)
	sc.Step(`^flotilla lists cluster "([^"]*)" in wave "([^"]*)"$`, s.listsClusterInWave)
	sc.Step(`^the Argo CD cluster Secret of cluster "([^"]*)" is deleted$`, s.argoSecretDeleted)
	sc.Step(`^flotilla discovers clusters from ClusterProfiles in cluster "([^"]*)" labelled "([^"]*)"$`, s.discoversClusterProfiles)
	sc.Step(`^a ClusterProfile for cluster "([^"]*)" labelled "([^"]*)" is created$`, s.clusterProfileCreated)
	sc.Step(`^flotilla discovers clusters from Cluster API in cluster "([^"]*)" labelled "([^"]*)"$`, s.discoversClusterAPI)
	sc.Step(`^Cluster API provisions cluster "([^"]*)" labelled "([^"]*)"$`, s.clusterAPIProvisions)
}

// argoWorld is where the scenario keeps Argo CD's cluster Secrets.
type argoWorld struct {
	cluster, namespace string
}

var argoWorlds sync.Map // *world -> *argoWorld

func (s *scenario) discoversArgoCD(ctx context.Context, cluster, selector string) error {
	cl, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ns, err := s.ownNamespace(ctx, c, "argocd")
	if err != nil {
		return err
	}
	w := s.w
	argoWorlds.Store(w, &argoWorld{cluster: cluster, namespace: ns})
	s.onCleanup(func() { argoWorlds.Delete(w) })
	w.discovery = map[string]any{"argocd": map[string]any{"namespace": ns, "selector": selector, "kubeconfig": cl.Kubeconfig}}
	return nil
}

// argoSecretCreated declares cluster to Argo CD, in its Secret's format,
// with labels; the scenario's last wave has it from then on (its Then
// steps read it).
func (s *scenario) argoSecretCreated(ctx context.Context, cluster, list string) error {
	v, _ := argoWorlds.Load(s.w)
	aw, _ := v.(*argoWorld)
	if aw == nil {
		return fmt.Errorf("no discovery of Argo CD's cluster Secrets in this scenario")
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	target, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	rc := target.Config
	conf, err := json.Marshal(map[string]any{"bearerToken": rc.BearerToken, "tlsClientConfig": map[string]any{
		"insecure": rc.Insecure, "caData": base64.StdEncoding.EncodeToString(rc.CAData),
		"certData": base64.StdEncoding.EncodeToString(rc.CertData), "keyData": base64.StdEncoding.EncodeToString(rc.KeyData)}})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + cluster, Namespace: aw.namespace,
			Labels: map[string]string{discovery.LabelSecretType: discovery.SecretTypeCluster}},
		StringData: map[string]string{"name": cluster, "server": rc.Host, "config": string(conf)},
	}
	for k, v := range labels {
		sec.Labels[k] = fmt.Sprint(v)
	}
	mgmt, err := s.clientsFor(aw.cluster)
	if err != nil {
		return err
	}
	if _, err := mgmt.Kube.CoreV1().Secrets(aw.namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the Argo CD cluster Secret of %s: %w", cluster, err)
	}
	w := s.w
	w.clusters = append(w.clusters, target)
	if !slices.Contains(w.waves[len(w.waves)-1], cluster) {
		w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], cluster)
	}
	return nil
}

// argoSecretDeleted deletes cluster's Secret; the scenario's waves no
// longer have the cluster (its Then steps leave it out).
func (s *scenario) argoSecretDeleted(ctx context.Context, cluster string) error {
	v, _ := argoWorlds.Load(s.w)
	aw, _ := v.(*argoWorld)
	if aw == nil {
		return fmt.Errorf("no discovery of Argo CD's cluster Secrets in this scenario")
	}
	mgmt, err := s.clientsFor(aw.cluster)
	if err != nil {
		return err
	}
	if err := mgmt.Kube.CoreV1().Secrets(aw.namespace).Delete(ctx, "cluster-"+cluster, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the Argo CD cluster Secret of %s: %w", cluster, err)
	}
	w := s.w
	w.clusters = slices.DeleteFunc(w.clusters, func(c *fleettest.Clients) bool { return c.Name == cluster })
	for i := range w.waves {
		w.waves[i] = slices.DeleteFunc(w.waves[i], func(n string) bool { return n == cluster })
	}
	return nil
}

// listsClusterInWave waits (15 s) until the API lists cluster in wave.
func (s *scenario) listsClusterInWave(ctx context.Context, cluster, wave string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got []struct {
			Name, Wave string
			Labels     map[string]string
		}
		if err := s.getJSON(ctx, "/api/v1/clusters", &got); err != nil {
			return err
		}
		for _, c := range got {
			if c.Name == cluster && c.Wave == wave {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API lists no cluster %s in wave %s after 15 s: %+v", cluster, wave, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// profileWorld is where the scenario keeps its ClusterProfiles, and the
// credentials its access provider's plugin prints, one file a cluster.
type profileWorld struct {
	cluster, namespace, creds string
}

var profileWorlds sync.Map // *world -> *profileWorld

// profileProvider is the access provider of the scenario's
// ClusterProfiles; its exec plugin prints the credential kept for the
// cluster the ClusterProfile names in its additional-envs extension, as
// upstream's secretreader plugin reads the one kept for it.
const profileProvider = "fleet-credentials"

// discoversClusterProfiles installs the ClusterProfile CRD in cluster, the
// management cluster, and has flotilla read the ClusterProfiles of a
// namespace there matching selector, with the provider profileProvider.
func (s *scenario) discoversClusterProfiles(ctx context.Context, cluster, selector string) error {
	cl, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	if err := s.fleet().InstallCRDs(ctx, cluster, localfleet.ClusterProfileCRDs); err != nil {
		return err
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ns, err := s.ownNamespace(ctx, c, "inventory")
	if err != nil {
		return err
	}
	w := s.w
	creds := filepath.Join(w.dir, "credentials")
	if err := os.MkdirAll(creds, 0o700); err != nil {
		return err
	}
	profileWorlds.Store(w, &profileWorld{cluster: cluster, namespace: ns, creds: creds})
	s.onCleanup(func() { profileWorlds.Delete(w) })
	w.discovery = map[string]any{"clusterProfiles": map[string]any{"namespaces": []string{ns}, "selector": selector, "kubeconfig": cl.Kubeconfig,
		"providers": []map[string]any{{"name": profileProvider, "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
			"execConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", `cat "$CREDENTIALS/$CLUSTER.json"`},
				"env": []map[string]string{{"name": "CREDENTIALS", "value": creds}}}}}}}
	return nil
}

// clusterProfileCreated declares cluster in a ClusterProfile with labels,
// its status as a cluster manager writes it: the provider profileProvider
// with the cluster's server and CA, and the cluster's credential kept for
// the provider's plugin. The scenario's last wave has it from then on.
func (s *scenario) clusterProfileCreated(ctx context.Context, cluster, list string) error {
	v, _ := profileWorlds.Load(s.w)
	pw, _ := v.(*profileWorld)
	if pw == nil {
		return fmt.Errorf("no discovery of ClusterProfiles in this scenario")
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	target, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	rc := target.Config
	status := map[string]any{"token": rc.BearerToken}
	if rc.BearerToken == "" {
		status = map[string]any{"clientCertificateData": string(rc.CertData), "clientKeyData": string(rc.KeyData)}
	}
	cred, err := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pw.creds, cluster+".json"), cred, 0o600); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
		"metadata": map[string]any{"name": cluster, "namespace": pw.namespace},
		"spec":     map[string]any{"displayName": cluster, "clusterManager": map[string]any{"name": "flotilla-features"}},
	}}
	l := map[string]string{}
	for k, v := range labels {
		l[k] = fmt.Sprint(v)
	}
	u.SetLabels(l)
	mgmt, err := s.clientsFor(pw.cluster)
	if err != nil {
		return err
	}
	profiles := mgmt.Dynamic.Resource(discovery.ClusterProfileResource).Namespace(pw.namespace)
	got, err := profiles.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the ClusterProfile of %s: %w", cluster, err)
	}
	access := map[string]any{"server": rc.Host, "insecure-skip-tls-verify": rc.Insecure,
		"extensions": []any{map[string]any{"name": discovery.ExtensionAdditionalEnvs, "extension": map[string]any{"CLUSTER": cluster}}}}
	if len(rc.CAData) > 0 {
		access["certificate-authority-data"] = base64.StdEncoding.EncodeToString(rc.CAData)
	}
	got.Object["status"] = map[string]any{
		"conditions": []any{map[string]any{"type": discovery.ConditionControlPlaneHealthy, "status": "True", "reason": "Healthy",
			"message": "", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
		"accessProviders": []any{map[string]any{"name": profileProvider, "cluster": access}}}
	if _, err := profiles.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of the ClusterProfile of %s: %w", cluster, err)
	}
	w := s.w
	w.clusters = append(w.clusters, target)
	if !slices.Contains(w.waves[len(w.waves)-1], cluster) {
		w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], cluster)
	}
	return nil
}

// capiWorld is where the scenario keeps Cluster API's Clusters.
type capiWorld struct {
	cluster, namespace string
}

var capiWorlds sync.Map // *world -> *capiWorld

// discoversClusterAPI installs Cluster API's Cluster CRD in cluster, the
// management cluster, and has flotilla read the Clusters of a namespace
// there matching selector.
func (s *scenario) discoversClusterAPI(ctx context.Context, cluster, selector string) error {
	cl, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	if err := s.fleet().InstallCRDs(ctx, cluster, localfleet.ClusterAPICRDs); err != nil {
		return err
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ns, err := s.ownNamespace(ctx, c, "capi")
	if err != nil {
		return err
	}
	w := s.w
	capiWorlds.Store(w, &capiWorld{cluster: cluster, namespace: ns})
	s.onCleanup(func() { capiWorlds.Delete(w) })
	w.discovery = map[string]any{"clusterAPI": map[string]any{"namespaces": []string{ns}, "selector": selector, "kubeconfig": cl.Kubeconfig}}
	return nil
}

// clusterAPIProvisions does what Cluster API does for a new cluster: its
// Cluster, labelled, then (once the control plane is up) the Secret
// <cluster>-kubeconfig with the cluster's kubeconfig. The scenario's last
// wave has it from then on.
func (s *scenario) clusterAPIProvisions(ctx context.Context, cluster, list string) error {
	v, _ := capiWorlds.Load(s.w)
	cw, _ := v.(*capiWorld)
	if cw == nil {
		return fmt.Errorf("no discovery of Cluster API's Clusters in this scenario")
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	fc, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	kubeconfig, err := os.ReadFile(fc.Kubeconfig)
	if err != nil {
		return err
	}
	target, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	mgmt, err := s.clientsFor(cw.cluster)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
		"metadata": map[string]any{"name": cluster, "namespace": cw.namespace}, "spec": map[string]any{}}}
	l := map[string]string{}
	for k, v := range labels {
		l[k] = fmt.Sprint(v)
	}
	u.SetLabels(l)
	if _, err := mgmt.Dynamic.Resource(discovery.ClusterAPIClusterResource).Namespace(cw.namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the Cluster %s: %w", cluster, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Namespace: cw.namespace,
		Labels: map[string]string{discovery.LabelClusterName: cluster}},
		Type: discovery.SecretTypeClusterAPI, Data: map[string][]byte{discovery.ClusterAPIKubeconfigKey: kubeconfig}}
	if _, err := mgmt.Kube.CoreV1().Secrets(cw.namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the kubeconfig Secret of %s: %w", cluster, err)
	}
	w := s.w
	w.clusters = append(w.clusters, target)
	if !slices.Contains(w.waves[len(w.waves)-1], cluster) {
		w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], cluster)
	}
	return nil
}

// ownNamespace creates a namespace of the scenario's own in the cluster
// of c, named from prefix, deleted when the scenario ends.
func (s *scenario) ownNamespace(ctx context.Context, c *fleettest.Clients, prefix string) (string, error) {
	ns, err := c.CreateNamespace(ctx, prefix)
	if err != nil {
		return "", err
	}
	s.onCleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns, nil
}
