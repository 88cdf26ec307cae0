// Command killtest measures scale-out mode losing a replica under load:
// three `flotilla serve` replicas on a three-node NATS JetStream cluster
// (this machine, loopback), a sender POSTing -webhooks registry
// notifications (each a new version of one application, tags of a real
// in-process registry) to the replicas in turn, retrying one that fails on
// the next replica as a Service would, and kill -9 of one replica when
// -kill-at of them were acknowledged. It then reads the whole stream and
// counts: acknowledged, lost (acknowledged but never planned: no rollout
// started for the version), duplicate rollouts (a version started twice),
// and the time from the kill until the surviving replicas held every
// partition again (their flotilla_partitions_held).
//
// The application's one cluster is a closed port, so each rollout fails
// at once; what is measured is the engine's intake and hand-over, not
// Kubernetes.
//
//	go run ./deploy/tools/killtest -webhooks 10000 -out killtest.md
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/nats-io/nats.go"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/cmdline"
	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

const (
	replicas   = 3
	partitions = 16
	stream     = "KILLTEST"
	token      = "killtest-token"
	// apps share the versions: notification i is version 1.0.(i/apps+1)
	// of application i%apps, whose image is kill/app<n>.
	apps = 50
)

func repoOf(app int) string { return "kill/app" + strconv.Itoa(app) }

// versionOf is notification i's application and version (i from 1).
func versionOf(i int) (int, string) {
	return (i - 1) % apps, "1.0." + strconv.Itoa((i-1)/apps+1)
}

type options struct {
	webhooks, killAt, concurrency int
	out                           string
}

// flags defines the command line's flags into o.
func (o *options) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.webhooks, "webhooks", 10000, "registry notifications to send, each a new version")
	fs.IntVar(&o.killAt, "kill-at", 0, "kill -9 a replica once this many were acknowledged (default: a third of -webhooks)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "concurrent senders")
	fs.StringVar(&o.out, "out", "", "write the Markdown result here")
}

func main() {
	var o options
	cmdline.Main("killtest", o.flags, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	if o.killAt == 0 {
		o.killAt = o.webhooks / 3
	}
	dir, err := os.MkdirTemp("", "flotilla-killtest-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	bin := filepath.Join(dir, "flotilla")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/flotilla-cd/flotilla")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building flotilla: %w", err)
	}
	cluster, err := natstest.Start(ctx, filepath.Join(dir, "nats"), 3)
	if err != nil {
		return fmt.Errorf("starting NATS (make fleet-build builds it): %w", err)
	}
	defer cluster.Stop()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	fmt.Fprintf(os.Stderr, "tagging %d versions in the registry\n", o.webhooks)
	digest, err := tagVersions(ctx, host, o.webhooks)
	if err != nil {
		return err
	}
	cfg, err := writeConfig(dir, cluster.URL(), host)
	if err != nil {
		return err
	}
	var reps []*replica
	for i := range replicas {
		r, err := startReplica(ctx, bin, cfg, dir, i)
		if err != nil {
			return err
		}
		defer r.stop()
		reps = append(reps, r)
	}
	for _, r := range reps {
		if err := r.waitReady(ctx); err != nil {
			return err
		}
	}
	if err := waitHeld(ctx, reps, time.Minute); err != nil {
		return fmt.Errorf("before the load: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%d replicas hold the %d partitions; sending %d notifications, kill -9 at %d acknowledged\n", replicas, partitions, o.webhooks, o.killAt)

	res := send(ctx, o, reps, host, digest)
	if res.killErr != nil {
		return res.killErr
	}
	// Every acknowledged version planned once: read the stream until it
	// holds a rollout.started of each, or five minutes passed.
	nc, err := nats.Connect(cluster.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := natsjs.Open(ctx, nc, natsjs.Options{Stream: stream, Subject: "flotilla." + stream, Partitions: partitions, Replicas: 3})
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	seen := planned{started: map[string]int{}, skipped: map[string]int{}}
	var after uint64
	best, progressed := len(res.acked)+1, time.Now()
	for {
		// A read fails when the replica answering it stays behind the
		// stream's end for a while (the replicas keep appending, on two
		// loaded cores): read on from where the last one ended, next time.
		if after, err = seen.read(ctx, b, after); err != nil {
			log.Printf("reading the stream after %d (again in a second): %v", after, err)
		}
		missing := 0
		for _, v := range res.acked {
			if seen.started[v]+seen.skipped[v] == 0 {
				missing++
			}
		}
		if missing < best {
			best, progressed = missing, time.Now()
		}
		if missing == 0 || time.Since(progressed) > time.Minute {
			break
		}
		time.Sleep(time.Second)
	}
	res.drained = time.Since(res.start)
	report := render(o, res, seen)
	fmt.Print(report)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report), 0o644)
	}
	return nil
}

// tagVersions pushes one image to every application's repository and tags
// it with the versions of the n notifications.
func tagVersions(ctx context.Context, host string, n int) (string, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return "", err
	}
	for a := range apps {
		t, err := name.NewTag(host + "/" + repoOf(a) + ":1.0.1")
		if err != nil {
			return "", err
		}
		if err := remote.Write(t, img, remote.WithContext(ctx)); err != nil {
			return "", err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := atomic.Int64{}
	next.Store(apps)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				app, version := versionOf(i)
				t, err := name.NewTag(host + "/" + repoOf(app) + ":" + version)
				if err == nil {
					err = remote.Tag(t, img, remote.WithContext(ctx))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "", fmt.Errorf("tagging: %w", err)
	}
	d, err := img.Digest()
	return d.String(), err
}

// writeConfig writes the replicas' config: scale-out mode, a registry
// receiver, one application whose one cluster is a closed port.
func writeConfig(dir, natsURL, host string) (string, error) {
	secret := filepath.Join(dir, "registry.token")
	if err := os.WriteFile(secret, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	port, err := freeport.Addr(context.Background())
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(dir, "c1.kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c1, cluster: {server: 'https://%s', insecure-skip-tls-verify: true}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c1, context: {cluster: c1, user: u}}]\ncurrent-context: c1\n", port)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return "", err
	}
	cfg := map[string]any{
		"server": map[string]any{"bus": map[string]any{"url": natsURL, "stream": stream, "replicas": 3, "partitions": partitions}},
		"receivers": []map[string]any{
			{"name": "registry", "type": "distribution", "secret": map[string]any{"file": secret}, "rateLimit": map[string]any{"perSecond": 100000, "burst": 100000}},
			{"name": "flagger", "type": "flagger", "secret": map[string]any{"file": secret}},
		},
		"fleet":        map[string]any{"clusters": []map[string]any{{"name": "c1", "kubeconfig": kubeconfig}}, "waves": []map[string]any{{"clusters": []string{"c1"}}}},
		"applications": applications(host),
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "flotilla.yaml")
	return path, os.WriteFile(path, raw, 0o600)
}

func applications(host string) []map[string]any {
	var out []map[string]any
	for a := range apps {
		out = append(out, map[string]any{
			"name": "app" + strconv.Itoa(a), "image": host + "/" + repoOf(a), "track": "MajorVersion", "namespace": "kill",
			"workload": map[string]any{"name": "app" + strconv.Itoa(a)}, "service": map[string]any{"port": 9898},
		})
	}
	return out
}

// replica is one `flotilla serve`.
type replica struct {
	name, addr, log string
	cmd             *exec.Cmd
	done            chan struct{}
	dead            atomic.Bool
}

func startReplica(ctx context.Context, bin, cfg, dir string, i int) (*replica, error) {
	addr, err := freeport.Addr(ctx)
	if err != nil {
		return nil, err
	}
	r := &replica{name: fmt.Sprintf("r%d", i), addr: addr, log: filepath.Join(dir, fmt.Sprintf("r%d.log", i)), done: make(chan struct{})}
	f, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.CommandContext(context.WithoutCancel(ctx), bin, "serve", "--config", cfg, "--listen", addr, "--data-dir", filepath.Join(dir, "data-"+r.name))
	r.cmd.Env = append(os.Environ(), "POD_NAME="+r.name)
	r.cmd.Stdout, r.cmd.Stderr = f, f
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	go func() { _ = r.cmd.Wait(); _ = f.Close(); close(r.done) }()
	return r, nil
}

func (r *replica) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			b, _ := os.ReadFile(r.log)
			return fmt.Errorf("replica %s exited:\n%s", r.name, b)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("replica %s not ready within a minute", r.name)
}

func (r *replica) kill() {
	r.dead.Store(true)
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

func (r *replica) stop() {
	if r.dead.Load() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.kill()
	}
}

// held reads a replica's flotilla_partitions_held.
func (r *replica) held(ctx context.Context) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flotilla_partitions_held "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, errors.New("no flotilla_partitions_held")
}

// waitHeld waits until the live replicas hold every partition between them.
func waitHeld(ctx context.Context, reps []*replica, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		sum := 0
		for _, r := range reps {
			if r.dead.Load() {
				continue
			}
			if n, err := r.held(ctx); err == nil {
				sum += n
			}
		}
		if sum == partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the live replicas hold %d of %d partitions after %s", sum, partitions, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type result struct {
	start                 time.Time
	sent, retried         int
	acked                 []string
	ackTimes              []time.Duration
	killedAfter, handover time.Duration
	sendTook, drained     time.Duration
	killErr               error
}

// send POSTs the notifications from -concurrency senders, each to the
// next live replica, retrying on the next one what failed, and kills a
// replica at -kill-at acknowledged.
func send(ctx context.Context, o options, reps []*replica, host, digest string) *result {
	res := &result{start: time.Now()}
	var mu sync.Mutex
	var next, turn atomic.Int64
	killOnce := sync.Once{}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(o.webhooks) {
					return
				}
				app, version := versionOf(int(i))
				key := repoOf(app) + ":" + version
				body := notification(host, repoOf(app), version, digest)
				t0 := time.Now()
				for try := 0; ; try++ {
					r := reps[turn.Add(1)%replicas]
					if r.dead.Load() {
						continue
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.addr+"/hooks/registry", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted {
							break
						}
					}
					if ctx.Err() != nil || try > 100 {
						return
					}
					mu.Lock()
					res.retried++
					mu.Unlock()
				}
				mu.Lock()
				res.sent++
				res.acked = append(res.acked, key)
				res.ackTimes = append(res.ackTimes, time.Since(t0))
				n := len(res.acked)
				mu.Unlock()
				if n == o.killAt {
					killOnce.Do(func() {
						res.killedAfter = time.Since(res.start)
						k := time.Now()
						reps[1].kill()
						fmt.Fprintf(os.Stderr, "killed %s (kill -9) at %d acknowledged\n", reps[1].name, n)
						if err := waitHeld(ctx, reps, 2*time.Minute); err != nil {
							res.killErr = err
						}
						res.handover = time.Since(k)
					})
				}
			}
		})
	}
	wg.Wait()
	res.sendTook = time.Since(res.start)
	return res
}

func notification(host, repo, version, digest string) []byte {
	body, _ := json.Marshal(map[string]any{"events": []map[string]any{{
		"id": "kill-" + strings.ReplaceAll(repo, "/", "-") + "-" + version, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "action": "push",
		"target": map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "repository": repo,
			"url": fmt.Sprintf("http://%s/v2/%s/manifests/%s", host, repo, digest), "tag": version,
		},
		"request": map[string]any{"host": host, "method": "PUT"},
		"actor":   map[string]any{"name": "ci"},
	}}})
	return body
}

// planned counts, per version, the rollouts started and the versions plan
// decided otherwise on (skipped: older than one in flight, say), from the
// stream.
type planned struct{ started, skipped map[string]int }

// read counts the records of the stream after seq into p, and returns the
// last one's sequence.
func (p planned) read(ctx context.Context, b *natsjs.Bus, after uint64) (uint64, error) {
	recs, err := b.Read(ctx, after, 0)
	if err != nil {
		return after, err
	}
	for _, r := range recs {
		after = r.Seq
		switch r.Event.Type() {
		case events.TypeRolloutStarted:
			if e, err := events.Decode[events.RolloutStarted](r.Event); err == nil {
				p.started[repoKey(e.Image, e.Tag)]++
			}
		case events.TypeRolloutSkipped:
			if e, err := events.Decode[events.RolloutSkipped](r.Event); err == nil {
				p.skipped[repoKey(e.Image, e.Tag)]++
			}
		}
	}
	return after, nil
}

// repoKey is "kill/app<n>:<tag>" of an image reference's repository.
func repoKey(image, tag string) string {
	_, repo, _ := strings.Cut(image, "/")
	return repo + ":" + tag
}

func render(o options, res *result, seen planned) string {
	lost, dup, skipped := 0, 0, 0
	for _, v := range res.acked {
		switch n := seen.started[v]; {
		case n == 0 && seen.skipped[v] == 0:
			lost++
		case n > 1:
			dup++
		}
		if seen.skipped[v] > 0 {
			skipped++
		}
	}
	slices.Sort(res.ackTimes)
	p := func(q float64) float64 {
		if len(res.ackTimes) == 0 {
			return 0
		}
		return float64(res.ackTimes[int(float64(len(res.ackTimes)-1)*q)].Microseconds()) / 1000
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`go run ./deploy/tools/killtest -webhooks %d` (%s): %d `flotilla serve` replicas on a three-node NATS JetStream cluster (stream R3, %d partitions), "+
		"%d concurrent senders POSTing registry notifications (each a new version) to the replicas in turn, a failed POST sent again to the next; "+
		"kill -9 of one replica at %d acknowledged.\n\n", o.webhooks, time.Now().UTC().Format("2006-01-02"), replicas, partitions, o.concurrency, o.killAt)
	b.WriteString("| sent | acknowledged | POSTs sent again after a failure | lost (acknowledged, never planned) | duplicate rollouts | skipped by plan | ack p50 / p99 | partitions held again after the kill | all sent in | all planned after |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %.1f / %.1f ms | %.1f s | %.1f s | %.1f s |\n\n", o.webhooks, len(res.acked), res.retried, lost, dup, skipped,
		p(0.5), p(0.99), res.handover.Seconds(), res.sendTook.Seconds(), res.drained.Seconds())
	return b.String()
}
