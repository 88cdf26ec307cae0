package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/apitest"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchedServer serves the API and its watch stream over a real store
// holding rollout r1 in flight.
func watchedServer(t *testing.T) (string, *store.Store, *embedded.Repo) {
	t.Helper()
	srv := apitest.Watched(t, rollout.Rollout{ID: "r1", Application: "shop", Tag: "1.1.0", Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterProgressing}}}}})
	return srv.URL, srv.Journal, srv.Repo
}

// finish ends r1 in phase, as the engine would: the state, then its event.
func finish(t *testing.T, s *store.Store, repo *embedded.Repo, phase rollout.Phase, cluster rollout.ClusterPhase) {
	t.Helper()
	if _, err := repo.Update(t.Context(), "r1", func(r *rollout.Rollout) error {
		r.Phase, r.Waves[0].Clusters[0].Phase, r.Reason = phase, cluster, "because"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e, err := events.New("end", events.Source, events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, "r1")
	if _, err := s.Append(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeWatchFollowsTheRolloutToItsEnd(t *testing.T) {
	for _, tc := range []struct {
		phase    rollout.Phase
		cluster  rollout.ClusterPhase
		wantCode int
		wantErr  string
	}{
		{rollout.Succeeded, rollout.ClusterSucceeded, 0, ""},
		{rollout.RolledBack, rollout.ClusterReverted, exitRolloutFailed, "rollout r1 ended RolledBack: because"},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			url, s, repo := watchedServer(t)
			var stdout, stderr syncBuffer
			code := make(chan int)
			// A long interval: only the watch stream can show the end in time.
			go func() {
				code <- Main([]string{"describe", "rollout", "r1", "--watch", "--interval", "1h", "--server", url}, &stdout, &stderr)
			}()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stdout.String(), "Progressing") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			// The stream is open once the first view is drawn; give it a moment.
			time.Sleep(200 * time.Millisecond)
			finish(t, s, repo, tc.phase, tc.cluster)
			select {
			case got := <-code:
				if got != tc.wantCode {
					t.Fatalf("exit %d, want %d; stderr %q", got, tc.wantCode, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("describe --watch did not end; it printed:\n%s", stdout.String())
			}
			views := strings.Split(stdout.String(), "--- ")
			last := views[len(views)-1]
			if len(views) < 3 || !strings.Contains(last, "Phase:        "+string(tc.phase)) || !strings.Contains(last, "c1       "+string(tc.cluster)) {
				t.Errorf("views:\n%s", stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantErr)
			}
		})
	}
}

func TestReadRollouts(t *testing.T) {
	stream := "retry: 2000\n: watching\n\nevent: event\nid: 3\ndata: {\"seq\":3}\n\nevent: rollout\nid: 3\ndata: {\"id\":\"r1\",\"phase\":\"Succeeded\"}\n\n: ping\n\n"
	out := make(chan rollout.Rollout, 4)
	if err := readRollouts(t.Context(), strings.NewReader(stream), out); err != nil {
		t.Fatal(err)
	}
	close(out)
	var got []string
	for r := range out {
		got = append(got, r.ID+" "+string(r.Phase))
	}
	if strings.Join(got, ",") != "r1 Succeeded" {
		t.Errorf("got %v", got)
	}
}
