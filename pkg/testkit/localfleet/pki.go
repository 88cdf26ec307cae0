package localfleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The fleet's client CA: every API server trusts the client certificates
// it signs (--client-ca-file) and presents one of them to kubelets
// (--kubelet-client-certificate), and a real node's kubelet trusts it for
// the API server's requests. It lives in the fleet's directory, so a node
// started later (by another process, too) can be issued certificates.
const (
	clientCAFile   = "client-ca.crt"
	clientCAKey    = "client-ca.key"
	kubeletClient  = "apiserver-kubelet-client"
	kubeletClientU = "kube-apiserver-kubelet-client"
)

// writeClientCA creates the fleet's client CA and the API servers' client
// certificate for kubelets in dir.
func writeClientCA(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the client CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flotilla local fleet client CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("creating the client CA: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the client CA key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, clientCAFile), "CERTIFICATE", der); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, clientCAKey), "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	ca, err := loadClientCA(dir)
	if err != nil {
		return err
	}
	crt, k, err := ca.issue(kubeletClientU)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, kubeletClient+".crt"), crt, 0o600); err != nil {
		return fmt.Errorf("writing the kubelet client certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, kubeletClient+".key"), k, 0o600); err != nil {
		return fmt.Errorf("writing the kubelet client key: %w", err)
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// loadClientCA reads the fleet's client CA from its directory.
func loadClientCA(dir string) (clientCA, error) {
	crtPEM, err := os.ReadFile(filepath.Join(dir, clientCAFile))
	if err != nil {
		return clientCA{}, fmt.Errorf("reading the fleet's client CA (a fleet started before it had one must be restarted): %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, clientCAKey))
	if err != nil {
		return clientCA{}, fmt.Errorf("reading the fleet's client CA key: %w", err)
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return clientCA{}, errors.New("decoding the fleet's client CA: no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return clientCA{}, fmt.Errorf("parsing the fleet's client CA: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return clientCA{}, fmt.Errorf("parsing the fleet's client CA key: %w", err)
	}
	return clientCA{cert: cert, key: key}, nil
}

// issue returns a client certificate and key (PEM) for the user cn in the
// groups orgs, as the API server reads them (CN is the user, O the groups).
func (ca clientCA) issue(cn string, orgs ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key for %s: %w", cn, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing a certificate for %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the key of %s: %w", cn, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeCertKubeconfig writes a kubeconfig for server that authenticates
// with a certificate of the fleet's client CA for the user cn in orgs.
func (ca clientCA) writeCertKubeconfig(path, server, cn string, orgs ...string) error {
	crt, key, err := ca.issue(cn, orgs...)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["fleet"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos[cn] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["fleet"] = &clientcmdapi.Context{Cluster: "fleet", AuthInfo: cn}
	cfg.CurrentContext = "fleet"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig of %s: %w", cn, err)
	}
	return nil
}
