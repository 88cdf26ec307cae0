package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// proxyHostCommand is the bench's own subcommand that serves the
// namespace proxies (`bench proxy-host <cert> <key>`, TLS with that
// certificate): it reads one proxyRequest per line on stdin and answers
// one proxyReply per line on stdout.
const proxyHostCommand = "proxy-host"

// proxyHost runs the named clusters' namespace proxies in a child
// process of their own, at the fleet's nice value. They stand in for
// API servers on other machines, like the fleet's processes: in the
// bench's process they shared flotilla's Go scheduler, heap and GC, and
// took its CPU at its priority (a 1,000-cluster wave's B window spent
// about a tenth of the process's CPU serving them).
type proxyHost struct {
	// caPEM is the certificate every proxy serves, its own CA: the
	// proxies speak TLS and HTTP/2 as API servers do (over plain HTTP,
	// client-go gave every named cluster http.DefaultTransport, whose
	// 100 idle connections in all made most runs of a 1,000-cluster
	// wave dial anew).
	caPEM []byte
	cmd   *exec.Cmd
	mu    sync.Mutex
	stdin io.WriteCloser
	in    *json.Encoder
	out   *bufio.Scanner
}

// proxyRequest opens a proxy (Op "open": to the cluster of Kubeconfig,
// namespace From rewritten to To) or closes one (Op "close": Addr).
type proxyRequest struct {
	Op         string `json:"op"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	Addr       string `json:"addr,omitempty"`
}

// proxyReply is the proxy's address, or why the request failed.
type proxyReply struct {
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"`
}

// startProxyHost starts `bench proxy-host` under nice(1), so that every
// thread of it runs at nice, serving a certificate for 127.0.0.1 it
// writes into dir.
func startProxyHost(dir string, nice int) (*proxyHost, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := loopbackCert()
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command("nice", "-n", strconv.Itoa(nice), exe, proxyHostCommand, certFile, keyFile)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the proxy host: %w", err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &proxyHost{caPEM: certPEM, cmd: cmd, stdin: in, in: json.NewEncoder(in), out: sc}, nil
}

// pid is the proxy host's process id (nice(1) execs it: the same).
func (h *proxyHost) pid() int { return h.cmd.Process.Pid }

func (h *proxyHost) call(req proxyRequest) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.in.Encode(req); err != nil {
		return "", fmt.Errorf("proxy host: %w", err)
	}
	if !h.out.Scan() {
		return "", fmt.Errorf("proxy host: no reply: %w", errors.Join(h.out.Err(), io.ErrUnexpectedEOF))
	}
	var rep proxyReply
	if err := json.Unmarshal(h.out.Bytes(), &rep); err != nil {
		return "", fmt.Errorf("proxy host: reply %q: %w", h.out.Text(), err)
	}
	if rep.Error != "" {
		return "", fmt.Errorf("proxy host: %s", rep.Error)
	}
	return rep.Addr, nil
}

// open starts a proxy to the cluster of kubeconfig rewriting namespace
// from to to, and returns its address.
func (h *proxyHost) open(kubeconfig, from, to string) (string, error) {
	return h.call(proxyRequest{Op: "open", Kubeconfig: kubeconfig, From: from, To: to})
}

// closeProxy stops the proxy at addr.
func (h *proxyHost) closeProxy(addr string) error {
	_, err := h.call(proxyRequest{Op: "close", Addr: addr})
	return err
}

// stop ends the proxy host: its stdin closed, it closes its proxies and
// returns (killed if it has not after 10 s).
func (h *proxyHost) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.stdin.Close()
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
}

// loopbackCert is a self-signed certificate for 127.0.0.1, its own CA.
func loopbackCert() (certPEM, keyPEM []byte, _ error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bench proxy-host"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// serveProxies is `bench proxy-host`: it serves proxy requests from in
// until in ends (the bench closed it, or ended); its proxies serve TLS
// with tlsCfg (nil: plain HTTP).
func serveProxies(ctx context.Context, in io.Reader, out io.Writer, tlsCfg *tls.Config) error {
	proxies := map[string]*nsProxy{}
	defer func() {
		for _, p := range proxies {
			p.close()
		}
	}()
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req proxyRequest
		var rep proxyReply
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			rep.Error = fmt.Sprintf("request %q: %v", sc.Text(), err)
		} else {
			rep = serveProxyRequest(ctx, proxies, req, tlsCfg)
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}

func serveProxyRequest(ctx context.Context, proxies map[string]*nsProxy, req proxyRequest, tlsCfg *tls.Config) proxyReply {
	switch req.Op {
	case "open":
		cfg, err := clientcmd.BuildConfigFromFlags("", req.Kubeconfig)
		if err != nil {
			return proxyReply{Error: fmt.Sprintf("kubeconfig %s: %v", req.Kubeconfig, err)}
		}
		p, err := newNSProxy(ctx, cfg, req.From, req.To, tlsCfg)
		if err != nil {
			return proxyReply{Error: err.Error()}
		}
		proxies[p.addr] = p
		return proxyReply{Addr: p.addr}
	case "close":
		if p, ok := proxies[req.Addr]; ok {
			p.close()
			delete(proxies, req.Addr)
		}
		return proxyReply{Addr: req.Addr}
	}
	return proxyReply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}
