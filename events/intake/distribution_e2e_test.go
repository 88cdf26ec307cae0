package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/events/intake"
)

// These tests use a real sender: Debian's docker-registry (CNCF distribution
// 2.8), configured to notify flotilla's intake, which journals into memory.
// Images are pushed to it with go-containerregistry, so every notification
// is one the registry built and sent itself.

const dockerRegistry = "/usr/bin/docker-registry"

func requireDockerRegistry(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(dockerRegistry); err != nil {
		t.Fatalf("%s is not installed (Debian package docker-registry, CNCF distribution 2.8): "+
			"run `make test`, which installs it through `make deps` (apt-get install docker-registry)", dockerRegistry)
	}
}

// journal is an in-memory [intake.Journal] that drops ids it has seen.
type journal struct {
	mu     sync.Mutex
	seen   map[string]bool
	events []cloudevents.Event
}

func (j *journal) Append(_ context.Context, evs ...cloudevents.Event) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seen == nil {
		j.seen = map[string]bool{}
	}
	n := 0
	for _, e := range evs {
		if !j.seen[e.ID()] {
			j.seen[e.ID()] = true
			j.events = append(j.events, e)
			n++
		}
	}
	return n, nil
}

func (j *journal) all() []cloudevents.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]cloudevents.Event(nil), j.events...)
}

// delivery is one request the registry made to the intake, and the answer.
type delivery struct {
	authorization, contentType string
	events                     []registryEvent
	status                     int
	response                   map[string]any
}

type registryEvent struct {
	Action string `json:"action"`
	Target struct {
		MediaType  string `json:"mediaType"`
		Digest     string `json:"digest"`
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"target"`
}

// recorder serves the intake and records every delivery in order.
type recorder struct {
	intake http.Handler
	mu     sync.Mutex
	log    []delivery
	errs   []string
	change chan struct{} // closed and replaced on every delivery
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := delivery{authorization: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
	var env struct {
		Events []registryEvent `json:"events"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		rec.fail("the registry sent a body that is not a notification envelope: %v: %q", err, body)
	}
	d.events = env.Events
	r.Body = io.NopCloser(bytes.NewReader(body))
	rw := httptest.NewRecorder()
	rec.intake.ServeHTTP(rw, r)
	d.status = rw.Code
	if err := json.Unmarshal(rw.Body.Bytes(), &d.response); err != nil {
		rec.fail("the intake answered %d with a body that is not JSON: %q", rw.Code, rw.Body.Bytes())
	}
	for k, v := range rw.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rw.Code)
	_, _ = w.Write(rw.Body.Bytes())

	rec.mu.Lock()
	rec.log = append(rec.log, d)
	close(rec.change)
	rec.change = make(chan struct{})
	rec.mu.Unlock()
}

func (rec *recorder) fail(format string, args ...any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.errs = append(rec.errs, fmt.Sprintf(format, args...))
}

// waitFor blocks until cond holds for the deliveries so far, or fails the
// test at the deadline. It wakes on every delivery, never on a timer.
func (rec *recorder) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]delivery) bool) []delivery {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		rec.mu.Lock()
		log, change := append([]delivery(nil), rec.log...), rec.change
		rec.mu.Unlock()
		if cond(log) {
			return log
		}
		select {
		case <-change:
		case <-deadline.C:
			t.Fatalf("waiting %s for %s; the registry delivered %d notifications: %s", timeout, what, len(log), summarize(log))
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		}
	}
}

func summarize(log []delivery) string {
	var parts []string
	for _, d := range log {
		var evs []string
		for _, e := range d.events {
			evs = append(evs, e.Action+" "+e.Target.MediaType+" "+e.Target.Tag)
		}
		parts = append(parts, fmt.Sprintf("[%d %s]", d.status, strings.Join(evs, "; ")))
	}
	return strings.Join(parts, " ")
}

const (
	e2eToken = "e2e-registry-token"
	e2eRepo  = "flotilla/e2e"
)

// startIntake serves flotilla's intake with one distribution receiver whose
// secret is e2eToken.
func startIntake(t *testing.T) (*journal, *recorder, string) {
	t.Helper()
	j := &journal{}
	in, err := intake.New([]intake.ReceiverConfig{{Name: "registry", Type: "distribution", Secret: e2eToken}}, j)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", in)
	rec := &recorder{intake: mux, change: make(chan struct{})}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, e := range rec.errs {
			t.Error(e)
		}
	})
	return j, rec, srv.URL + "/hooks/registry"
}

// startRegistry runs docker-registry on a free 127.0.0.1 port, notifying
// hookURL with "Authorization: Bearer <token>", and returns its host:port.
func startRegistry(t *testing.T, hookURL, token string) string {
	t.Helper()
	dir := t.TempDir()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, err := yaml.Marshal(map[string]any{
		"version": 0.1,
		"log":     map[string]any{"level": "info", "formatter": "text"},
		"storage": map[string]any{"filesystem": map[string]any{"rootdirectory": filepath.Join(dir, "data")}},
		"http":    map[string]any{"addr": addr, "secret": "e2e-http-secret"},
		"notifications": map[string]any{"endpoints": []map[string]any{{
			"name":      "flotilla",
			"url":       hookURL,
			"headers":   map[string][]string{"Authorization": {"Bearer " + token}},
			"timeout":   "2s",
			"threshold": 3,
			"backoff":   "200ms",
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Not the test's context: the cleanup below stops it, after the context ends.
	cmd := exec.CommandContext(context.Background(), dockerRegistry, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting docker-registry: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("docker-registry log:\n%s", b)
		}
	})
	// Ready when /v2/ answers; the process exiting or the deadline fails.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("docker-registry exited:\n%s", b)
		case <-ctx.Done():
			t.Fatalf("docker-registry not serving http://%s/v2/ after 20s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// push writes a random image (a config and layers blobs, then the manifest)
// as repo:tag and returns it.
func push(t *testing.T, registry, tag string, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(512, layers)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(registry + "/" + e2eRepo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return img
}

func isManifest(mt string) bool { return strings.Contains(mt, "manifest") }

func TestDistributionE2E_PushByTagJournalsOneImagePushed(t *testing.T) {
	requireDockerRegistry(t)
	t.Parallel()
	j, rec, hook := startIntake(t)
	registry := startRegistry(t, hook, e2eToken)

	const layers = 2
	img := push(t, registry, "1.0.0", layers)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	// A pull after the push: its notification is queued behind every
	// notification of the push, so once it arrived, the push's all have.
	byDigest, err := name.NewDigest(registry + "/" + e2eRepo + "@" + digest.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Get(byDigest, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	log := rec.waitFor(t, "the pull notification after the push", 30*time.Second, func(log []delivery) bool {
		for _, d := range log {
			for _, e := range d.events {
				if e.Action == "pull" && e.Target.Digest == digest.String() {
					return true
				}
			}
		}
		return false
	})

	var blobPushes, manifestPushes int
	for _, d := range log {
		if d.authorization != "Bearer "+e2eToken {
			t.Errorf("the registry sent Authorization %q, want the configured bearer token", d.authorization)
		}
		if d.status != http.StatusAccepted {
			t.Errorf("the intake answered %d to %s, want 202 (%v)", d.status, summarize([]delivery{d}), d.response)
		}
		for _, e := range d.events {
			switch {
			case e.Action == "push" && isManifest(e.Target.MediaType):
				manifestPushes++
				if _, ok := d.response["accepted"]; !ok {
					t.Errorf("the manifest push was not accepted: %v", d.response)
				}
			case e.Action == "push":
				blobPushes++
				if len(d.events) == 1 && !strings.Contains(fmt.Sprint(d.response["ignored"]), "blob push") {
					t.Errorf("a blob push notification was not ignored as one: %v", d.response)
				}
			}
		}
	}
	if want := layers + 1; blobPushes != want { // the layers and the config
		t.Errorf("the registry notified %d blob pushes, want %d (%s)", blobPushes, want, summarize(log))
	}
	if manifestPushes != 1 {
		t.Errorf("the registry notified %d manifest pushes, want 1 (%s)", manifestPushes, summarize(log))
	}

	evs := j.all()
	if len(evs) != 1 {
		t.Fatalf("journaled %d events, want exactly 1: %v", len(evs), evs)
	}
	e := evs[0]
	if e.Type() != events.TypeImagePushed {
		t.Fatalf("journaled a %s, want %s", e.Type(), events.TypeImagePushed)
	}
	p, err := events.Decode[events.ImagePushed](e)
	if err != nil {
		t.Fatal(err)
	}
	want := events.ImagePushed{
		Registry: registry, Repository: e2eRepo, Tag: "1.0.0", Digest: digest.String(), MediaType: string(mt),
		Sender: intake.SenderDistribution, Receiver: "registry",
	}
	got := p
	got.Pusher, got.DeliveryID = "", "" // anonymous pushes; the id is the registry's
	if got != want {
		t.Errorf("journaled %+v, want %+v", got, want)
	}
	if s := e.Subject(); s != registry+"/"+e2eRepo+":1.0.0" {
		t.Errorf("subject %q, want %s/%s:1.0.0", s, registry, e2eRepo)
	}
}

func TestDistributionE2E_WrongTokenIsRefused(t *testing.T) {
	requireDockerRegistry(t)
	t.Parallel()
	j, rec, hook := startIntake(t)
	const wrong = "not-the-token"
	registry := startRegistry(t, hook, wrong)
	push(t, registry, "1.0.0", 1)

	// The registry retries a refused notification (threshold 3, then every
	// backoff): wait for a few attempts.
	log := rec.waitFor(t, "3 refused deliveries", 30*time.Second, func(log []delivery) bool { return len(log) >= 3 })
	for _, d := range log {
		if d.authorization != "Bearer "+wrong {
			t.Errorf("the registry sent Authorization %q, want %q", d.authorization, "Bearer "+wrong)
		}
		if d.status != http.StatusUnauthorized {
			t.Errorf("the intake answered %d to a wrong token, want 401 (%v)", d.status, d.response)
		}
	}
	if evs := j.all(); len(evs) != 0 {
		t.Errorf("journaled %d events from deliveries with a wrong token, want none: %v", len(evs), evs)
	}
}
