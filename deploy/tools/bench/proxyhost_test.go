package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestServeProxies drives `bench proxy-host`'s protocol: a proxy opened
// on a cluster forwards with the namespace rewritten, a bad request gets
// an error reply and the host goes on, a closed proxy stops serving.
func TestServeProxies(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"kind":"Deployment"}`)
	}))
	defer api.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: api.URL}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveProxies(t.Context(), inR, outW, nil); _ = outW.Close() }()
	enc, replies := json.NewEncoder(inW), bufio.NewScanner(outR)
	call := func(req proxyRequest) proxyReply {
		t.Helper()
		if err := enc.Encode(req); err != nil {
			t.Fatal(err)
		}
		if !replies.Scan() {
			t.Fatalf("no reply to %+v: %v", req, replies.Err())
		}
		var rep proxyReply
		if err := json.Unmarshal(replies.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}

	if rep := call(proxyRequest{Op: "open", Kubeconfig: filepath.Join(t.TempDir(), "none")}); rep.Error == "" {
		t.Errorf("open of a missing kubeconfig: %+v, want an error", rep)
	}
	if rep := call(proxyRequest{Op: "bogus"}); rep.Error != `unknown op "bogus"` {
		t.Errorf("bogus op: %+v", rep)
	}
	rep := call(proxyRequest{Op: "open", Kubeconfig: kc, From: "apps", To: "apps-w2-01"})
	if rep.Error != "" || rep.Addr == "" {
		t.Fatalf("open: %+v", rep)
	}
	resp, err := http.Get("http://" + rep.Addr + "/apis/apps/v1/namespaces/apps/deployments/web")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"/apis/apps/v1/namespaces/apps-w2-01/deployments/web"}, paths); diff != "" {
		t.Errorf("paths the API server saw (-want +got):\n%s", diff)
	}
	if rep := call(proxyRequest{Op: "close", Addr: rep.Addr}); rep.Error != "" {
		t.Errorf("close: %+v", rep)
	}
	if resp, err := http.Get("http://" + rep.Addr + "/api"); err == nil {
		_ = resp.Body.Close()
		t.Errorf("a closed proxy still serves")
	}
	_ = inW.Close()
	if err := <-done; err != nil {
		t.Errorf("serveProxies: %v", err)
	}
	_ = os.Remove(kc)
}

// TestProxyServesTLSAndHTTP2: a proxy of the proxy host speaks TLS with
// its loopback certificate and HTTP/2, as an API server does; a client
// trusting that certificate as its CA (the proxied kubeconfigs' CA data)
// reaches the API server through it.
func TestProxyServesTLSAndHTTP2(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	defer api.Close()
	certPEM, keyPEM, err := loopbackCert()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newNSProxy(t.Context(), &rest.Config{Host: api.URL}, "apps", "apps-w2-01", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
	resp, err := c.Get("https://" + p.addr + "/api/v1/namespaces/apps/pods")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if diff := cmp.Diff([]string{"HTTP/2.0", "/api/v1/namespaces/apps-w2-01/pods"}, []string{resp.Proto, string(body)}); diff != "" {
		t.Errorf("protocol and path (-want +got):\n%s", diff)
	}
}
