package fleettest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Prometheus runs the local fleet's Prometheus binary on its own, for a
// test: config is its prometheus.yml, files are written beside it (rule
// files), and it is ready (or the test failed) within a minute. It is
// killed when the test ends. It returns its URL.
func Prometheus(t testing.TB, config string, files map[string][]byte) string {
	t.Helper()
	bin := filepath.Join(localfleet.BinDir(), "prometheus-"+localfleet.PrometheusVersion)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Prometheus (make fleet-build, which make test runs, builds it): %v", err)
	}
	dir := t.TempDir()
	all := map[string][]byte{"prometheus.yml": []byte(config)}
	maps.Copy(all, files)
	for name, b := range all {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = log.Close()
	})
	u := "http://127.0.0.1:" + strconv.Itoa(port)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			out, _ := os.ReadFile(log.Name())
			return false, fmt.Errorf("prometheus exited:\n%s", out)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/-/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
