package features

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fleetrollout"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

func (s *scenario) registerScaleOutSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the replica holding the rollout of "([^"]*)" is killed with SIGKILL$`, s.killRolloutHolder)
	sc.Step(`^the other replicas hold every partition, the killed one's included$`, s.partitionsTakenOver)
	sc.Step(`^the NATS node leading flotilla's stream is killed$`, s.killStreamLeader)
	sc.Step(`^the NATS node is started again$`, s.restartNATSNode)
	sc.Step(`^the replicas are restarted one by one while (\d+) versions are pushed, one every (\d+)ms$`, s.rollingRestartDuringPushes)
	sc.Step(`^every push flotilla acknowledged reached the event sink and its rollout ended$`, s.acknowledgedRolledOut)
	sc.Step(`^flotilla keeps FleetRollouts in cluster "([^"]*)"$`, s.keepFleetRollouts)
	sc.Step("^`kubectl get fleetrollouts --watch` runs in that cluster$", s.kubectlWatch)
	sc.Step("^`kubectl get fleetrollouts --watch` showed the rollout of \"([^\"]*)\" in wave \"([^\"]*)\", then \"([^\"]*)\", then \"([^\"]*)\"$", s.kubectlShowedWaves)
	sc.Step("^`kubectl get fleetrollouts` lists the rollout of \"([^\"]*)\" as \"([^\"]*)\" with clusters \"([^\"]*)\"$", s.kubectlLists)
}

// partitions is busConfig's partition count.
const partitions = 6

// leases reads, from NATS, who holds each partition of the scenario's
// stream: the <stream>_leases bucket natsjs.Partitions keeps, each key
// partition.<p> valued with its holder's replica name.
func (s *scenario) leases(ctx context.Context) (map[int]string, error) {
	return readNATS(ctx, s.readLeases)
}

// natsReadRetry is how long readNATS tries a read NATS does not answer.
const natsReadRetry = 30 * time.Second

// readNATS is read, tried again while NATS does not answer it in time (its
// cluster busy with other scenarios, or electing a leader after a scenario
// killed a node: the package's scenarios share one NATS cluster), for up
// to natsReadRetry in all. Any other error is returned at once.
func readNATS[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(natsReadRetry)
	for {
		v, err := read(ctx)
		if err == nil || !natsTimedOut(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(time.Second)
	}
}

// natsTimedOut tells a read NATS did not answer in time from one it
// refused.
func natsTimedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// bucket opens the scenario's NATS KV bucket <stream>_<name> (leases,
// docs) on a connection of its own, which done closes.
func (s *scenario) bucket(ctx context.Context, name string) (kv jetstream.KeyValue, done func(), err error) {
	nc, err := nats.Connect(natsCluster.URL())
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		kv, err = js.KeyValue(ctx, s.w.namespace+"_"+name)
	}
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("the bucket %s_%s: %w", s.w.namespace, name, err)
	}
	return kv, nc.Close, nil
}

// readLeases is one read of leases, each request bounded by the jetstream
// client's default timeout.
func (s *scenario) readLeases(ctx context.Context) (map[int]string, error) {
	kv, done, err := s.bucket(ctx, "leases")
	if err != nil {
		return nil, err
	}
	defer done()
	held := map[int]string{}
	for p := range partitions {
		e, err := kv.Get(ctx, "partition."+strconv.Itoa(p))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the lease of partition %d: %w", p, err)
		}
		held[p] = string(e.Value())
	}
	return held, nil
}

// replicaName is the name replica i goes by (its POD_NAME, see
// newReplicas).
func (s *scenario) replicaName(i int) string { return fmt.Sprintf("%s-r%d", s.w.namespace, i) }

// killRolloutHolder kills (SIGKILL) the replica that holds the partition
// of the rollout's events, as its lease in NATS says: the one moving it on.
func (s *scenario) killRolloutHolder(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	p := natsjs.PartitionFor(dispatch.RolloutKey(id), partitions)
	held, err := s.leases(ctx)
	if err != nil {
		return err
	}
	for i, r := range s.w.flotilla.replicas {
		if held[p] == s.replicaName(i) && r.running() {
			fmt.Fprintf(os.Stderr, "scale-out: killing replica %d, which holds partition %d of rollout %s\n", i, p, id)
			s.w.killed = held[p]
			return r.kill()
		}
	}
	return fmt.Errorf("no running replica holds partition %d of rollout %s: the leases say %v", p, id, held)
}

// partitionsTakenOver waits until the replicas still running hold every
// partition between them, as the leases in NATS say: the killed one's
// lease expired and another replica took each of its partitions.
func (s *scenario) partitionsTakenOver(ctx context.Context) error {
	running := map[string]bool{}
	for i, r := range s.w.flotilla.replicas {
		if r.running() {
			running[s.replicaName(i)] = true
		}
	}
	var held map[int]string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var err error
		if held, err = s.leases(ctx); err != nil {
			return err
		}
		all := len(held) == partitions
		for _, r := range held {
			all = all && running[r]
		}
		if all {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("after a minute the partitions' leases are %v, want each held by one of the running replicas %v (the killed one: %s)", held, slices.Sorted(maps.Keys(running)), s.w.killed)
}

// natsNodeMu lets one scenario at a time take a NATS node away, so the
// package's cluster keeps its quorum, and only while no scenario's
// replicas start: creating a stream or bucket of three replicas needs
// three nodes up (startReplicas holds it for reading).
var natsNodeMu sync.RWMutex

// killStreamLeader kills the NATS node leading the scenario's stream.
func (s *scenario) killStreamLeader(ctx context.Context) error {
	nc, err := nats.Connect(natsCluster.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := js.Stream(ctx, s.w.namespace)
	if err != nil {
		return fmt.Errorf("reading flotilla's stream: %w", err)
	}
	info := st.CachedInfo()
	if info.Cluster == nil || len(info.Cluster.Leader) < 2 {
		return fmt.Errorf("flotilla's stream has no leader: %+v", info.Cluster)
	}
	i, err := strconv.Atoi(info.Cluster.Leader[1:]) // nodes are n1, n2, n3
	if err != nil {
		return fmt.Errorf("stream leader %q: %w", info.Cluster.Leader, err)
	}
	natsNodeMu.Lock()
	down := i - 1
	s.w.natsDown = &down
	natsCluster.Kill(down)
	s.onCleanup(func() { _ = s.restartNATSNode(context.Background()) }) //nolint:contextcheck // a cleanup: it runs once the scenario's context has ended
	return nil
}

// restartNATSNode starts the node killStreamLeader killed and waits for
// the cluster to be whole again.
func (s *scenario) restartNATSNode(ctx context.Context) error {
	if s.w.natsDown == nil {
		return nil
	}
	defer natsNodeMu.Unlock()
	i := *s.w.natsDown
	s.w.natsDown = nil
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := natsCluster.Restart(ctx, i); err != nil {
		return err
	}
	return natsCluster.WaitReady(ctx, time.Minute)
}

// rollingRestartDuringPushes restarts the replicas one after another
// (SIGTERM, then started again and ready) while a sender pushes n
// versions from 1.0.1, one every `every` milliseconds, each notification
// retried until acknowledged, as a registry's notification endpoint does.
func (s *scenario) rollingRestartDuringPushes(ctx context.Context, n, every int) error {
	results := s.pushEvery(ctx, n, every)
	start := time.Now()
	for i, r := range s.w.flotilla.replicas {
		r.stop()
		if err := r.start(ctx); err != nil {
			return fmt.Errorf("restarting replica %d: %w", i, err)
		}
	}
	fmt.Fprintf(os.Stderr, "scale-out: %d replicas restarted one by one in %s\n", len(s.w.flotilla.replicas), time.Since(start).Round(time.Millisecond))
	var errs []error
	for r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("version %s: %w", r.version, r.err))
			continue
		}
		s.w.acked = append(s.w.acked, r.version)
	}
	return errors.Join(errs...)
}

// acknowledgedRolledOut checks that every acknowledged push reached the
// event sink as image.pushed and that the rollout of its version started
// and ended (succeeded, superseded by a newer push, or rolled back):
// nothing acknowledged lost, no rollout stalled.
func (s *scenario) acknowledgedRolledOut(ctx context.Context) error {
	if len(s.w.acked) == 0 {
		return errors.New("no push was acknowledged")
	}
	ends := map[string]bool{events.TypeRolloutSucceeded: true, events.TypeRolloutSuperseded: true, events.TypeRolloutRolledBack: true}
	var errs []error
	for _, v := range s.w.acked {
		if _, err := s.w.sink.waitFor(ctx, "image.pushed of "+v, func(e cloudevents.Event) bool {
			if e.Type() != events.TypeImagePushed {
				return false
			}
			p, err := events.Decode[events.ImagePushed](e)
			return err == nil && p.Tag == v
		}); err != nil {
			errs = append(errs, err)
			continue
		}
		id, err := s.rolloutID(ctx, v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := s.w.sink.waitFor(ctx, "end of rollout "+id+" of "+v, func(e cloudevents.Event) bool {
			return ends[e.Type()] && events.RolloutID(e) == id
		}); err != nil {
			errs = append(errs, err)
		}
	}
	fmt.Fprintf(os.Stderr, "scale-out: pushes acknowledged %d, lost or stalled %d\n", len(s.w.acked), len(errs))
	return errors.Join(errs...)
}

// keepFleetRollouts has flotilla keep its FleetRollouts in a namespace of
// its own in cluster (the management cluster), with the chart's CRD
// applied there as `helm install` does.
func (s *scenario) keepFleetRollouts(ctx context.Context, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	cl, _ := s.fleet().Cluster(cluster)
	if err := installCRD(ctx, c.Config, fleetrollout.CRD, "fleetrollouts.flotilla.dev"); err != nil {
		return err
	}
	ns, err := c.CreateNamespace(ctx, "fro")
	if err != nil {
		return err
	}
	s.w.fleetRollouts = map[string]any{"namespace": ns, "kubeconfig": cl.Kubeconfig}
	s.w.fleetRolloutsIn = cluster
	return nil
}

// kubectlWatch runs `kubectl get fleetrollouts --watch` in the namespace
// of the FleetRollouts until the scenario ends, keeping what it prints.
func (s *scenario) kubectlWatch(ctx context.Context) error {
	if s.w.fleetRollouts == nil {
		return errors.New("no step had flotilla keep FleetRollouts")
	}
	cl, _ := s.fleet().Cluster(s.w.fleetRolloutsIn)
	out := &lockedBuffer{}
	cmd := exec.CommandContext(context.WithoutCancel(ctx), kubectl(), "--kubeconfig", cl.Kubeconfig,
		"get", "fleetrollouts", "-n", s.w.fleetRollouts["namespace"].(string), "--watch")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running kubectl: %w", err)
	}
	s.onCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s.w.kubectlOut = out
	return nil
}

func kubectl() string {
	return filepath.Join(localfleet.BinDir(), "kubectl-"+localfleet.KubeVersion)
}

// kubectlShowedWaves waits until the watch printed the rollout of version
// in each wave in turn, then in its final phase: every line with the
// version, in order.
func (s *scenario) kubectlShowedWaves(ctx context.Context, version, wave1, wave2, phase string) error {
	if s.w.kubectlOut == nil {
		return errors.New("no step ran kubectl get fleetrollouts --watch")
	}
	want := []string{wave1, wave2, phase}
	deadline := time.Now().Add(waitTimeout)
	for {
		var lines []string
		for l := range strings.Lines(s.w.kubectlOut.String()) {
			if strings.Contains(l, " "+version+" ") {
				lines = append(lines, l)
			}
		}
		next := 0
		for _, l := range lines {
			if next < len(want) && strings.Contains(l, want[next]) {
				next++
			}
		}
		if next == len(want) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubectl get fleetrollouts --watch did not show %q in turn for %s; it printed:\n%s", want, version, s.w.kubectlOut.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// kubectlLists runs `kubectl get fleetrollouts` once and finds the row of
// the rollout of version with the phase and clusters wanted.
func (s *scenario) kubectlLists(ctx context.Context, version, phase, clusters string) error {
	cl, _ := s.fleet().Cluster(s.w.fleetRolloutsIn)
	out, err := exec.CommandContext(ctx, kubectl(), "--kubeconfig", cl.Kubeconfig,
		"get", "fleetrollouts", "-n", s.w.fleetRollouts["namespace"].(string)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl get fleetrollouts: %w: %s", err, out)
	}
	header := true
	for l := range strings.Lines(string(out)) {
		if header {
			header = false
			if !strings.HasPrefix(l, "NAME") || !strings.Contains(l, "APPLICATION") || !strings.Contains(l, "PHASE") || !strings.Contains(l, "WAVE") {
				return fmt.Errorf("kubectl get fleetrollouts printed no table of FleetRollouts:\n%s", out)
			}
			continue
		}
		f := strings.Fields(l)
		if slices.Contains(f, s.w.app) && slices.Contains(f, version) && slices.Contains(f, phase) && slices.Contains(f, clusters) {
			return nil
		}
	}
	return fmt.Errorf("kubectl get fleetrollouts lists no %s %s %s with clusters %s:\n%s", s.w.app, version, phase, clusters, out)
}

// installCRD applies one of flotilla's CRDs (its YAML) to a cluster of the
// fleet and waits until name is established.
func installCRD(ctx context.Context, cfg *rest.Config, yaml []byte, name string) error {
	crds, err := kube.Decode(yaml)
	if err != nil {
		return err
	}
	a, err := kube.NewApplier(cfg, "flotilla-features")
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, crds...); err != nil {
		return fmt.Errorf("applying the CRD %s: %w", name, err)
	}
	return kube.WaitCRDsEstablished(ctx, cfg, name)
}
