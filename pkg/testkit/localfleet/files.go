package localfleet

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kwokStages makes kwok's fake pods Ready, completes Job pods, and completes
// Tekton TaskRun pods (or fails them when labelled simfail: "true"; the
// annotation flotilla.test/step-results becomes the step's termination message).
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// auditPolicy has the API servers log every patch of a workload or a
// Canary, with its body (Cluster.AuditLog).
//
//go:embed audit-policy.yaml
var auditPolicy []byte

// sharedFiles are the files every cluster of a fleet uses.
type sharedFiles struct {
	saKey, saPub, tokens, stages string
	// auditPolicy is the API servers' audit policy (AuditLog).
	auditPolicy string
	// clientCA signs the client certificates the API servers accept, and
	// kubeletClientCert/Key are theirs for kubelets (see pki.go).
	clientCA, kubeletClientCert, kubeletClientKey string
}

func writeSharedFiles(dir, token string) (sharedFiles, error) {
	s := sharedFiles{
		saKey:  filepath.Join(dir, "sa.key"),
		saPub:  filepath.Join(dir, "sa.pub"),
		tokens: filepath.Join(dir, "tokens.csv"),
		stages: filepath.Join(dir, "kwok-stages.yaml"),

		auditPolicy: filepath.Join(dir, "audit-policy.yaml"),
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return s, fmt.Errorf("generating service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return s, fmt.Errorf("encoding service account key: %w", err)
	}
	files := map[string][]byte{
		s.saKey:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		s.saPub:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		s.tokens: []byte(token + ",admin,admin-uid,system:masters\n"),
		s.stages: kwokStages,

		s.auditPolicy: auditPolicy,
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return s, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := writeClientCA(dir); err != nil {
		return s, err
	}
	s.clientCA = filepath.Join(dir, clientCAFile)
	s.kubeletClientCert = filepath.Join(dir, kubeletClient+".crt")
	s.kubeletClientKey = filepath.Join(dir, kubeletClient+".key")
	return s, nil
}

// writeKubeconfig writes an admin kubeconfig for one cluster. The API server's
// certificate is self-signed by the server itself, so TLS verification is off:
// the fleet only ever listens on loopback.
func writeKubeconfig(path, name, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating cluster dir: %w", err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
