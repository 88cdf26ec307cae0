package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// crashChildEnv, when set to a store path, turns TestCrashKeepsAcknowledgedEvents
// into the child process: it appends events to that store forever, printing
// each id once its Append has returned, until it is killed.
const crashChildEnv = "FLOTILLA_STORE_CRASH_CHILD"

const (
	crashWriters   = 8    // concurrent appenders in the child, to exercise group commit
	crashKillAfter = 2000 // acknowledged events before the parent kills the child
)

func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}

	path := filepath.Join(t.TempDir(), "flotilla.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashKeepsAcknowledgedEvents$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}

	var acked []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			continue
		}
		acked = append(acked, id)
		if len(acked) == crashKillAfter && !killed {
			// SIGKILL mid-stream; keep reading what was already printed, as
			// those appends returned too.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("killing child: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited after %d acknowledged events without being killed: %v", len(acked), err)
	}
	t.Logf("child killed after %d acknowledged events (%v)", len(acked), err)

	s := openAt(t, path)
	for _, id := range acked {
		ok, err := s.Has(t.Context(), id)
		if err != nil {
			t.Fatalf("Has(%q): %v", id, err)
		}
		if !ok {
			t.Errorf("acknowledged event %q lost", id)
		}
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) || seen[r.Event.ID()] {
			t.Fatalf("record %d: seq %d id %q; want gapless, unique", i, r.Seq, r.Event.ID())
		}
		seen[r.Event.ID()] = true
	}
	if got := s.LastSeq(); got != uint64(len(recs)) {
		t.Errorf("LastSeq = %d, want %d", got, len(recs))
	}
	if len(recs) < len(acked) {
		t.Errorf("journal has %d records, fewer than %d acknowledged", len(recs), len(acked))
	}

	// The document and the events of UpdateAndAppend are never separated:
	// every update the document counts has its event in the journal (from
	// the outbox if the crash came first), and no event is ahead of it.
	var d counter
	if _, err := s.Get(t.Context(), "docs", "counter", &d); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= d.N; i++ {
		if ok, err := s.Has(t.Context(), fmt.Sprintf("update-%d", i)); !ok || err != nil {
			t.Errorf("update %d is in the document but its event is not journaled (%v)", i, err)
		}
	}
	if ok, _ := s.Has(t.Context(), fmt.Sprintf("update-%d", d.N+1)); ok {
		t.Errorf("event of update %d journaled, but the document counts %d", d.N+1, d.N)
	}
	t.Logf("the child made %d updates", d.N)
	if d.N == 0 {
		t.Error("the child made no update")
	}
}

type counter struct{ N int }

// crashChild appends until killed. It runs inside the re-executed test binary,
// so it reports failure by exiting non-zero.
func crashChild(path string) {
	s, err := store.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			var d counter
			_, err := s.UpdateAndAppend(context.Background(), "docs", "counter", &d, func(bool) ([]cloudevents.Event, error) {
				d.N++
				e, err := newEvent(fmt.Sprintf("update-%d", d.N))
				return []cloudevents.Event{e}, err
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
	})
	for w := range crashWriters {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("crash-%d-%d", w, i)
				e, err := newEvent(id)
				if err == nil {
					_, err = s.Append(context.Background(), e)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Printf("ack %s\n", id) // unbuffered: on the pipe once Printf returns
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
