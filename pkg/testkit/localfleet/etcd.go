package localfleet

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

const etcdPorts = 3

func (f *Fleet) startEtcd(ctx context.Context, o Options, bins binaries, ports []int) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	args := []string{
		"--name=fleet",
		"--data-dir=" + filepath.Join(f.Dir, "etcd-data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-cluster=fleet=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", ports[2]),
		"--unsafe-no-fsync",
		"--log-level=warn",
		"--quota-backend-bytes=4294967296",
	}
	p, err := startProcess(ctx, f.Dir, "etcd", bins.etcd(), args, nil, o.DieWithParent)
	if err != nil {
		return err
	}
	f.EtcdURL = client
	if err := f.record(-1, p); err != nil {
		return err
	}
	return waitFor(ctx, p, 30*time.Second, "etcd healthy", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client+"/health", `"health":"true"`), nil
	})
}

// httpOK tells whether GET url answers 200 and its body contains want.
func httpOK(ctx context.Context, url, want string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode == http.StatusOK && strings.Contains(b.String(), want)
}
