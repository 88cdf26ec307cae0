package tektonrun

import (
	"context"
	"fmt"
	"os"

	"github.com/flotilla-cd/flotilla/pipelines"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"
)

// KubeconfigKey is the key of a kubeconfig Secret that holds the kubeconfig.
const KubeconfigKey = "kubeconfig"

// Kubeconfig renders cfg as a self-contained kubeconfig: certificate and
// token files are read into it, so it works wherever it is mounted. A
// config that authenticates through an exec or auth-provider plugin cannot
// travel and is refused.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return nil, events.Permanent(fmt.Errorf("the cluster's config uses a credential plugin, which cannot run in a pipeline's pod: give it a token or client certificate"))
	}
	read := func(data []byte, file, what string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster's %s: %w", what, err)
		}
		return b, nil
	}
	ca, err := read(cfg.CAData, cfg.CAFile, "CA")
	if err != nil {
		return nil, err
	}
	cert, err := read(cfg.CertData, cfg.CertFile, "client certificate")
	if err != nil {
		return nil, err
	}
	key, err := read(cfg.KeyData, cfg.KeyFile, "client key")
	if err != nil {
		return nil, err
	}
	token := cfg.BearerToken
	if token == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster's token: %w", err)
		}
		token = string(b)
	}
	server := cfg.Host
	if cfg.APIPath != "" && cfg.APIPath != "/api" && cfg.APIPath != "/apis" {
		server += cfg.APIPath
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["target"] = &clientcmdapi.Cluster{
		Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName,
	}
	kc.AuthInfos["target"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cert, ClientKeyData: key, Token: token,
		Username: cfg.Username, Password: cfg.Password,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups,
		ImpersonateUID: cfg.Impersonate.UID, ImpersonateUserExtra: cfg.Impersonate.Extra,
	}
	kc.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "target"}
	kc.CurrentContext = "target"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return b, nil
}

// ApplyKubeconfigSecret creates or updates, with server-side apply, the
// Secret namespace/name holding cfg as a kubeconfig (key KubeconfigKey),
// labelled with the cluster's name. The pipelines mount it; its content
// never appears in a PipelineRun.
func ApplyKubeconfigSecret(ctx context.Context, kube kubernetes.Interface, namespace, name, cluster string, cfg *rest.Config) error {
	b, err := Kubeconfig(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig of cluster %s: %w", cluster, err)
	}
	s := corev1ac.Secret(name, namespace).
		WithLabels(map[string]string{pipelines.LabelCluster: pipelines.LabelValue(cluster), "app.kubernetes.io/managed-by": "flotilla"}).
		WithType("Opaque").
		WithData(map[string][]byte{KubeconfigKey: b})
	if _, err := kube.CoreV1().Secrets(namespace).Apply(ctx, s, metav1.ApplyOptions{FieldManager: "flotilla", Force: true}); err != nil {
		return fmt.Errorf("applying the kubeconfig Secret %s/%s of cluster %s: %w", namespace, name, cluster, err)
	}
	return nil
}
