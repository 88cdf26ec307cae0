package localfleet

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// A real node's registry is this very binary started again with
// envRegistry set (the service proxy's re-exec pattern): the package's init
// serves go-containerregistry's in-memory registry and never returns. As a
// process of the fleet it outlives the process that started the node, as
// the node's containerd and kubelet do.
const envRegistry = "FLOTILLA_FLEET_REGISTRY"

func init() {
	if addr := os.Getenv(envRegistry); addr != "" {
		srv := &http.Server{
			Addr:              addr,
			Handler:           registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags))),
			ReadHeaderTimeout: 10 * time.Second,
		}
		err := srv.ListenAndServe()
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

// startRegistry runs the node's registry on a free loopback port.
func (n *RealNode) startRegistry(ctx context.Context, index int) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary for the registry: %w", err)
	}
	ports, err := freePorts(ctx, 1)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := n.run(ctx, index, "registry", exe, nil, nil, envRegistry+"="+addr)
	if err != nil {
		return err
	}
	n.Registry = addr
	return waitFor(ctx, p, 30*time.Second, n.Name+" registry serving", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, "http://"+addr+"/v2/", ""), nil
	})
}
