package kube

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrCredentialPlugin: a config that authenticates through an exec or
// auth-provider plugin cannot travel to another machine.
var ErrCredentialPlugin = errors.New("the cluster's config uses a credential plugin")

// Kubeconfig renders cfg as a self-contained kubeconfig: certificate and
// token files are read into it, so it works wherever it is mounted. A
// config that authenticates through an exec or auth-provider plugin cannot
// travel and is refused (ErrCredentialPlugin).
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		return nil, ErrCredentialPlugin
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
