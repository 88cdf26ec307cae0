package discovery

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// LabelSecretType marks Argo CD's declarative Secrets; its value
// SecretTypeCluster a cluster's.
const (
	LabelSecretType   = "argocd.argoproj.io/secret-type"
	SecretTypeCluster = "cluster"
)

// argoConfig is a cluster Secret's data.config, as Argo CD writes it
// (its ClusterConfig: byte fields are base64 in the JSON).
type argoConfig struct {
	Username        string `json:"username"`
	Password        string `json:"password"`
	BearerToken     string `json:"bearerToken"`
	TLSClientConfig struct {
		Insecure   bool   `json:"insecure"`
		ServerName string `json:"serverName"`
		CAData     []byte `json:"caData"`
		CertData   []byte `json:"certData"`
		KeyData    []byte `json:"keyData"`
	} `json:"tlsClientConfig"`
	ExecProviderConfig *struct {
		Command     string            `json:"command"`
		Args        []string          `json:"args"`
		Env         map[string]string `json:"env"`
		APIVersion  string            `json:"apiVersion"`
		InstallHint string            `json:"installHint"`
	} `json:"execProviderConfig"`
	AWSAuthConfig json.RawMessage `json:"awsAuthConfig"`
}

// ArgoCDCluster is the cluster an Argo CD cluster Secret declares: named
// after data.name (else the Secret's name), a DNS label; reached at
// data.server with data.config's credentials (a bearer token, a user and
// password, client certificates, an exec plugin; awsAuthConfig is
// refused: flotilla does not run Argo CD's argocd-k8s-auth); labelled
// with the Secret's labels. The error says why a Secret is no cluster.
func ArgoCDCluster(s *corev1.Secret) (config.Cluster, error) {
	src := "fleet.discovery.argocd: Secret " + s.Namespace + "/" + s.Name
	name := strings.TrimSpace(string(s.Data["name"]))
	if name == "" {
		name = s.Name
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return config.Cluster{}, fmt.Errorf("%s: cluster name %q is not a DNS label (flotilla's cluster names are): %s", src, name, strings.Join(errs, "; "))
	}
	server := strings.TrimSpace(string(s.Data["server"]))
	if server == "" {
		return config.Cluster{}, fmt.Errorf("%s: data.server is empty", src)
	}
	var ac argoConfig
	if b := s.Data["config"]; len(b) > 0 {
		if err := json.Unmarshal(b, &ac); err != nil {
			return config.Cluster{}, fmt.Errorf("%s: data.config: %w", src, err)
		}
	}
	if len(ac.AWSAuthConfig) > 0 && string(ac.AWSAuthConfig) != "null" {
		return config.Cluster{}, fmt.Errorf("%s: data.config.awsAuthConfig is not supported (use execProviderConfig with aws eks get-token, or a token)", src)
	}
	kc, err := kubeconfig(name, server, ac)
	if err != nil {
		return config.Cluster{}, fmt.Errorf("%s: %w", src, err)
	}
	return config.Cluster{Name: name, Labels: maps.Clone(s.Labels), Source: src, KubeconfigData: kc}, nil
}

// kubeconfig writes a kubeconfig of one context for the cluster.
func kubeconfig(name, server string, ac argoConfig) ([]byte, error) {
	t := ac.TLSClientConfig
	user := &clientcmdapi.AuthInfo{
		Token: ac.BearerToken, Username: ac.Username, Password: ac.Password,
		ClientCertificateData: t.CertData, ClientKeyData: t.KeyData,
	}
	if e := ac.ExecProviderConfig; e != nil {
		user.Exec = &clientcmdapi.ExecConfig{Command: e.Command, Args: e.Args, APIVersion: e.APIVersion,
			InstallHint: e.InstallHint, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		for _, k := range slices.Sorted(maps.Keys(e.Env)) { // the same Secret, the same kubeconfig
			user.Exec.Env = append(user.Exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: e.Env[k]})
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: t.Insecure,
		TLSServerName: t.ServerName, CertificateAuthorityData: t.CAData}
	cfg.AuthInfos[name] = user
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing its kubeconfig: %w", err)
	}
	return b, nil
}
