package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/bootstrap"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// bootstrapFlags are the flags fleet bootstrap and fleet check share: which
// config, which clusters, how to reach them, and what goes in.
type bootstrapFlags struct {
	config   string
	clusters []string
	admin    []string
	allow    []string
	opts     bootstrap.Options
	// manageFlagger applies bootstrap's Flagger where another runs.
	manageFlagger bool
}

func (f *bootstrapFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.config, "config", "c", "", "flotilla's configuration file (its fleet, applications and Tekton executor)")
	fl.StringSliceVar(&f.clusters, "cluster", nil, "only these clusters (repeat or comma-separate; \""+bootstrap.TektonTarget+"\" is the Tekton cluster outside the fleet); default all")
	fl.StringArrayVar(&f.admin, "admin-kubeconfig", nil, "cluster=path: reach that cluster with this kubeconfig (rights to install CRDs, ClusterRoles, Namespaces) instead of the config's")
	fl.StringArrayVar(&f.allow, "allow", nil, "resource or group/resource git applications render (such as configmaps, networking.k8s.io/ingresses): flotilla may read, create and patch it in application namespaces")
	fl.StringVar(&f.opts.Namespace, "namespace", bootstrap.DefaultNamespace, "namespace of flotilla's ServiceAccount in each cluster")
	fl.StringVar(&f.opts.FlaggerNamespace, "flagger-namespace", bootstrap.DefaultFlaggerNamespace, "namespace Flagger runs in")
	fl.StringVar(&f.opts.MeshProvider, "mesh-provider", "", "Flagger's -mesh-provider (default: the provider of the applications targeting the cluster when they agree, else kubernetes)")
	fl.StringVar(&f.opts.MetricsServer, "metrics-server", "", "Flagger's -metrics-server (Prometheus) (default the config's fleet.metricsServer)")
	fl.StringArrayVar(&f.opts.FlaggerArgs, "flagger-arg", nil, "an argument added to Flagger's (repeat), such as -slack-url=https://... or -enable-leader-election=true")
	fl.StringVar(&f.opts.LoadTesterNamespace, "load-tester-namespace", "", "also install Flagger's load tester into this namespace")
	fl.StringVar(&f.opts.Image, "image", "", "image of flotilla's Tekton steps (default the image of this version)")
	fl.BoolVar(&f.manageFlagger, "manage-flagger", false, "apply flotilla's Flagger "+bootstrap.FlaggerVersion+" even where a Flagger bootstrap did not install (Helm, Flux, ...) runs; by default that one is left alone")
}

// fleetCluster is what fleet bootstrap and check need of a cluster: pkg/kube's
// Applier.
type fleetCluster interface {
	bootstrap.Applier
	bootstrap.Lister
}

// foreign finds the Flaggers bootstrap did not install in t's cluster, which
// bootstrap leaves alone without --manage-flagger: none where the target
// runs no Flagger.
func (f *bootstrapFlags) foreign(ctx context.Context, t bootstrap.Target, l bootstrap.Lister) ([]bootstrap.Foreign, error) {
	if !t.Flagger {
		return nil, nil
	}
	fs, err := bootstrap.FindForeign(ctx, l)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", t.Name, err)
	}
	return fs, nil
}

// plan loads the config and plans the targets, each with the kubeconfig to
// reach it by.
func (f *bootstrapFlags) plan() ([]bootstrap.Target, error) {
	if f.config == "" {
		return nil, usageError{errors.New("--config is required")}
	}
	for _, a := range f.allow {
		r, err := bootstrap.ParseAllow(a)
		if err != nil {
			return nil, usageError{err}
		}
		f.opts.Allow = append(f.opts.Allow, r)
	}
	admin := map[string]string{}
	for _, a := range f.admin {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return nil, usageError{fmt.Errorf("--admin-kubeconfig %q: want cluster=path", a)}
		}
		admin[name] = path
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return nil, err
	}
	ts, err := bootstrap.Plan(cfg, f.clusters, f.opts)
	if err != nil {
		return nil, usageError{err}
	}
	for name := range admin {
		if !containsTarget(ts, name) {
			return nil, usageError{fmt.Errorf("--admin-kubeconfig names %q, which is not a cluster bootstrap works on", name)}
		}
	}
	for i := range ts {
		if p, ok := admin[ts[i].Name]; ok {
			ts[i].Kubeconfig, ts[i].Context = p, ""
		}
	}
	return ts, nil
}

func containsTarget(ts []bootstrap.Target, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

// forEach runs fn on every target at once and prints what each returned, in
// the targets' order; it returns the errors joined.
func forEach(ctx context.Context, ts []bootstrap.Target, out io.Writer, fn func(context.Context, bootstrap.Target, *rest.Config, *kube.Applier) ([]string, error)) error {
	lines := make([][]string, len(ts))
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			cfg, err := kube.RESTConfig(t.Kubeconfig, t.Context)
			if err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", t.Name, err)
				return
			}
			a, err := kube.NewApplier(cfg, bootstrap.FieldManager)
			if err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", t.Name, err)
				return
			}
			lines[i], errs[i] = fn(ctx, t, cfg, a)
		})
	}
	wg.Wait()
	for _, ls := range lines {
		for _, l := range ls {
			fmt.Fprintln(out, l)
		}
	}
	return errors.Join(errs...)
}

func newFleetBootstrapCmd() *cobra.Command {
	var (
		f          bootstrapFlags
		dryRun     bool
		output     string
		kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Install Flagger, flotilla's identity and pipelines into every cluster of the fleet",
		Long: `bootstrap puts into each cluster of the config (or those --cluster names) what
flotilla needs there, with server-side apply (field manager flotilla-bootstrap):

  - Flagger ` + bootstrap.FlaggerVersion + ` (CRDs, RBAC, controller) as Flagger's own kustomize
    overlay installs it, in --flagger-namespace, with the mesh provider of the
    applications that target the cluster; with --load-tester-namespace, also
    Flagger's load tester;
  - flotilla's identity: ServiceAccount ` + bootstrap.ServiceAccount + ` in --namespace and its token,
    ClusterRole ` + bootstrap.ReaderRole + ` (read what flotilla renders) bound cluster-wide,
    ClusterRole ` + bootstrap.DeliverRole + ` (write it) bound in each application namespace
    (created when missing); no Secrets, Namespaces or RBAC;
  - with executor tekton, in the cluster that runs Tekton: flotilla's Pipeline
    and Tasks, Role ` + bootstrap.TektonRole + ` (run them) and the steps' ServiceAccount.

A Flagger that bootstrap did not install (a Deployment, in any namespace,
running an image .../flagger whose fields no flotilla-bootstrap apply owns:
installed by Helm, Flux or anything else) is left alone: bootstrap prints its
version and who installed it, and applies none of Flagger's own objects (its
namespace, CRDs, ServiceAccount, ClusterRole and binding, Deployment) to that
cluster, only flotilla's; Flagger's CRDs must be there (bootstrap fails naming
those missing). --manage-flagger applies flotilla's Flagger anyway, in
--flagger-namespace (remove a Flagger running elsewhere first: two would
fight over the same canaries); from then on bootstrap manages it. Where the
other Flagger's Deployment stands where bootstrap's goes and the server
refuses to change it in place (another selector, a rollingUpdate strategy),
bootstrap deletes it, waits until it and its pods are gone, and creates its
own: "replaced" ("would replace" with --dry-run, which deletes nothing).

It prints one line per object: created, configured, unchanged or replaced (a
second run changes nothing). --dry-run asks each cluster what would change
and changes nothing (and reports a Flagger it would leave alone the same way);
--output yaml prints the objects without reaching any cluster (Flagger's
included). --write-kubeconfigs DIR writes DIR/<cluster>.kubeconfig, carrying
flotilla's token: point the config's clusters (or the chart's kubeconfigs) at
them. bootstrap itself needs rights to install (the config's kubeconfigs, or
--admin-kubeconfig per cluster).`,
		Example: `  flotilla fleet bootstrap --config flotilla.yaml --dry-run
  flotilla fleet bootstrap --config flotilla.yaml --write-kubeconfigs ./kubeconfigs
  flotilla fleet bootstrap --config flotilla.yaml --cluster eu-1 --admin-kubeconfig eu-1=$HOME/.kube/eu-1
  flotilla fleet bootstrap --config flotilla.yaml --output yaml > fleet.yaml
  flotilla fleet bootstrap --config flotilla.yaml --cluster eu-1 --manage-flagger`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "yaml" {
				return usageError{fmt.Errorf("--output %q: only yaml", output)}
			}
			if kubeconfig != "" && (dryRun || output != "") {
				return usageError{errors.New("--write-kubeconfigs cannot go with --dry-run or --output")}
			}
			ts, err := f.plan()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "yaml" {
				return printObjects(out, ts)
			}
			if kubeconfig != "" {
				if err := os.MkdirAll(kubeconfig, 0o700); err != nil {
					return err
				}
			}
			return forEach(cmd.Context(), ts, out, func(ctx context.Context, t bootstrap.Target, cfg *rest.Config, a *kube.Applier) ([]string, error) {
				lines, t, err := f.leaveForeign(ctx, t, a)
				if err != nil {
					return lines, err
				}
				rs, err := bootstrap.Apply(ctx, a, t, dryRun)
				for _, r := range rs {
					lines = append(lines, fmt.Sprintf("%s\t%s\t%s", r.Cluster, r.Object, r.Action))
				}
				if err != nil || kubeconfig == "" {
					return lines, err
				}
				b, err := bootstrap.Kubeconfig(ctx, cfg, cmp.Or(f.opts.Namespace, bootstrap.DefaultNamespace))
				if err != nil {
					return lines, fmt.Errorf("cluster %s: %w", t.Name, err)
				}
				path := filepath.Join(kubeconfig, t.Name+".kubeconfig")
				if err := os.WriteFile(path, b, 0o600); err != nil {
					return lines, err
				}
				return append(lines, fmt.Sprintf("%s\tkubeconfig of %s/%s written to %s", t.Name, cmp.Or(f.opts.Namespace, bootstrap.DefaultNamespace), bootstrap.ServiceAccount, path)), nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "ask each cluster what would change; change nothing")
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml: print the objects instead of applying them (reaches no cluster)")
	cmd.Flags().StringVar(&kubeconfig, "write-kubeconfigs", "", "write each cluster's kubeconfig with flotilla's token into this directory")
	return cmd
}

// leaveForeign tells which Flaggers bootstrap did not install run in t's
// cluster, one line each, and returns t without Flagger's own objects when
// any does (bootstrap.LeaveAlone). With --manage-flagger it returns t taking
// over (bootstrap.TakeOver).
func (f *bootstrapFlags) leaveForeign(ctx context.Context, t bootstrap.Target, a fleetCluster) ([]string, bootstrap.Target, error) {
	if f.manageFlagger {
		return nil, t.TakeOver(), nil
	}
	fs, err := f.foreign(ctx, t, a)
	if err != nil || len(fs) == 0 {
		return nil, t, err
	}
	lines := make([]string, 0, len(fs))
	for _, ff := range fs {
		lines = append(lines, fmt.Sprintf("%s\t%s found: left alone (--manage-flagger to apply flotilla's %s over it)", t.Name, ff, bootstrap.FlaggerVersion))
	}
	left, err := bootstrap.LeaveAlone(ctx, a, t)
	if err != nil {
		return lines, t, fmt.Errorf("%w (or pass --manage-flagger)", err)
	}
	return lines, left, nil
}

// printObjects prints every target's objects as one YAML stream, each
// document headed by its cluster.
func printObjects(out io.Writer, ts []bootstrap.Target) error {
	for _, t := range ts {
		for _, o := range t.Objects {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "---\n# cluster: %s\n%s", t.Name, b)
		}
	}
	return nil
}

func newFleetCheckCmd() *cobra.Command {
	var f bootstrapFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report, per cluster, what bootstrap would install or update, and whether Flagger is available",
		Long: `check compares each cluster with what 'flotilla fleet bootstrap' (same flags)
would apply: an object is missing, outdated (the cluster would store something
else: the first differing field is named), or, for Flagger's Deployment, not
available. It asks with server-side dry runs, so it needs bootstrap's rights,
and changes nothing. The exit code is 1 when a cluster is not ready.

A Flagger that bootstrap did not install (Helm's, Flux's: see 'fleet bootstrap')
is judged by its version (the image's tag), never compared with bootstrap's
Flagger: older than ` + bootstrap.FlaggerVersion + ` (the version flotilla is tested with) is
outdated; the same or newer is ok, and so is a version the image does not
tell (a digest only), each printed with a line saying so; not available is
not ready. Its CRDs are checked for presence only. With --manage-flagger,
check compares with bootstrap's Flagger, as bootstrap would apply it (outdated
where bootstrap would replace the other's Deployment).`,
		Example: `  flotilla fleet check --config flotilla.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := f.plan()
			if err != nil {
				return err
			}
			var mu sync.Mutex
			notReady := 0
			err = forEach(cmd.Context(), ts, cmd.OutOrStdout(), func(ctx context.Context, t bootstrap.Target, _ *rest.Config, a *kube.Applier) ([]string, error) {
				fs, err := f.check(ctx, t, a)
				if err != nil {
					return nil, err
				}
				var lines []string
				for _, f := range fs {
					// An OK finding with a detail is another installer's Flagger.
					if f.State == bootstrap.OK && f.Detail == "" {
						continue
					}
					l := fmt.Sprintf("%s\t%s\t%s", f.Cluster, f.Object, f.State)
					if f.Detail != "" {
						l += ": " + f.Detail
					}
					lines = append(lines, l)
				}
				if bootstrap.Ready(fs) {
					return append(lines, fmt.Sprintf("%s\tready (%d objects current)", t.Name, len(fs))), nil
				}
				mu.Lock()
				notReady++
				mu.Unlock()
				return append(lines, fmt.Sprintf("%s\tnot ready", t.Name)), nil
			})
			if err != nil {
				return err
			}
			if notReady > 0 {
				return exitError{1, fmt.Errorf("%d cluster(s) not ready: run flotilla fleet bootstrap", notReady)}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// check is bootstrap.Check, or bootstrap.CheckForeign where a Flagger
// bootstrap did not install runs (unless --manage-flagger: then Check of t
// taking over).
func (f *bootstrapFlags) check(ctx context.Context, t bootstrap.Target, a fleetCluster) ([]bootstrap.Finding, error) {
	if f.manageFlagger {
		return bootstrap.Check(ctx, a, t.TakeOver())
	}
	fs, err := f.foreign(ctx, t, a)
	if err != nil {
		return nil, err
	}
	if len(fs) > 0 {
		return bootstrap.CheckForeign(ctx, a, t, fs)
	}
	return bootstrap.Check(ctx, a, t)
}
