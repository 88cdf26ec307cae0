// Command local starts, stops and lists the local fleet of real Kubernetes
// clusters that flotilla's tests and demo run against.
//
//	go run ./deploy/tools/local up -n 3 [-tekton] [-stock-flagger c3] [-dir DIR]
//	go run ./deploy/tools/local status [-dir DIR]
//	go run ./deploy/tools/local down [-dir DIR]
//
// Build the binaries first with deploy/tools/local/build.sh (make fleet-build).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func defaultDir() string {
	if d := os.Getenv("FLOTILLA_FLEET_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "flotilla-fleet")
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: local up|down|status [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", defaultDir(), "fleet directory (state, kubeconfigs, logs); env FLOTILLA_FLEET_DIR")
	n := fs.Int("n", 3, "number of clusters (up)")
	tekton := fs.Bool("tekton", true, "also run Tekton Pipelines in every cluster (up)")
	stock := fs.String("stock-flagger", "", "comma-separated clusters that run the stock Flagger build (up)")
	webhook := fs.String("flagger-event-webhook", "", "global Flagger -event-webhook URL (up)")
	noFlagger := fs.Bool("no-flagger", false, "start the clusters without Flagger, for flotilla fleet bootstrap to install (up)")
	prom := fs.Bool("prometheus", true, "run a Prometheus every Flagger queries (-metrics-server) (up)")
	loadTester := fs.Bool("load-tester", true, "run Flagger's load tester as a host process (up)")
	mesh := fs.String("mesh-provider", "", "comma-separated cluster=provider, Flagger's -mesh-provider per cluster, such as c1=gatewayapi:v1,c2=istio (default kubernetes) (up)")
	svcProxy := fs.Bool("service-proxy", true, "send Flagger's requests for cluster Services through the fleet's service proxy (up)")
	realNodes := fs.String("real-nodes", "", "comma-separated clusters that get a real node (kubelet on containerd + runc; needs root, make deps and build.sh) (up)")
	kubeProxyNode := fs.String("kube-proxy-node", "", "the cluster whose real node also runs kube-proxy, so its ClusterIP Services answer on the host (one per host) (up)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch args[0] {
	case "up":
		meshes := map[string]string{}
		for _, kv := range strings.Split(*mesh, ",") {
			if kv == "" {
				continue
			}
			c, p, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("-mesh-provider %q: want cluster=provider", kv)
			}
			meshes[c] = p
		}
		var stockList []string
		if *stock != "" {
			stockList = strings.Split(*stock, ",")
		}
		f, err := localfleet.Up(ctx, localfleet.Options{
			Dir: *dir, Clusters: *n, Tekton: *tekton, StockFlagger: stockList,
			FlaggerEventWebhook: *webhook, NoFlagger: *noFlagger, Prometheus: *prom, LoadTester: *loadTester, ServiceProxy: *svcProxy, MeshProviders: meshes,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		})
		if err != nil {
			return err
		}
		for _, c := range strings.Split(*realNodes, ",") {
			if c == "" {
				continue
			}
			n, err := f.StartRealNode(ctx, c, localfleet.RealNodeOptions{KubeProxy: c == *kubeProxyNode, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
			if err != nil {
				return fmt.Errorf("starting the real node of %s: %w", c, err)
			}
			fmt.Printf("real node %s in %s: pods on %s, images from %s (pods need the toleration %s and the node selector %s=true)\n", n.Name, c, n.PodSubnet, n.Registry, localfleet.RealNodeTaint, localfleet.RealNodeLabel)
		}
		printStatus(f)
		fmt.Printf("\nexport FLOTILLA_FLEET_DIR=%s\nexport KUBECONFIG=%s\n", f.Dir, f.Clusters[0].Kubeconfig)
		return nil
	case "down":
		f, err := localfleet.Load(*dir)
		if err != nil {
			return fmt.Errorf("no fleet in %s: %w", *dir, err)
		}
		if err := f.Down(ctx); err != nil {
			return err
		}
		fmt.Printf("fleet in %s stopped\n", *dir)
		return nil
	case "status":
		f, err := localfleet.Load(*dir)
		if err != nil {
			fmt.Printf("no fleet in %s\n", *dir)
			return nil
		}
		printStatus(f)
		return nil
	default:
		return fmt.Errorf("unknown command %q: want up, down or status", args[0])
	}
}

func printStatus(f *localfleet.Fleet) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLUSTER\tPROCESS\tPID\tSTATE\tLOG")
	row := func(cluster string, p localfleet.Process) {
		state := "running"
		if !f.ProcessRunning(p) {
			state = "stopped"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", cluster, p.Name, p.PID, state, p.Log)
	}
	row("-", f.Etcd)
	for _, p := range f.Services {
		row("-", p)
	}
	for _, c := range f.Clusters {
		for _, p := range c.Processes {
			row(c.Name, p)
		}
	}
	_ = w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLUSTER\tAPISERVER\tKUBECONFIG\tFLAGGER\tTEKTON")
	for _, c := range f.Clusters {
		flagger := "fast"
		if c.StockFlagger {
			flagger = "stock"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\n", c.Name, c.APIServer, c.Kubeconfig, flagger, c.Tekton)
	}
	_ = w.Flush()
	if f.PrometheusURL != "" || f.LoadTesterURL != "" {
		fmt.Printf("\nprometheus: %s\nload tester: %s\n", f.PrometheusURL, f.LoadTesterURL)
	}
}
