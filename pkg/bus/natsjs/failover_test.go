package natsjs_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream's leader is killed (SIGKILL) while four writers append: every
// event an Append acknowledged is in the stream once, and a writer that
// retries what failed with the same ids loses nothing and doubles nothing.
func TestKillingTheStreamLeaderLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a NATS node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := newOptions()
	b := open(t, o)
	leader := streamLeader(ctx, t, o.Stream)

	const writers, perWriter = 4, 150
	var mu sync.Mutex
	acked := map[string]int{}
	var wg sync.WaitGroup
	killed := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if w == 0 && i == perWriter/3 {
					cluster.Kill(leader)
					close(killed)
				}
				id := fmt.Sprintf("w%d-%03d", w, i)
				for {
					actx, acancel := context.WithTimeout(ctx, 5*time.Second)
					recs, err := b.Append(actx, event(t, id))
					acancel()
					if err == nil {
						mu.Lock()
						for _, r := range recs {
							acked[r.Event.ID()]++
						}
						mu.Unlock()
						break
					}
					if ctx.Err() != nil {
						t.Errorf("writer %d gave up on %s: %v", w, id, err)
						return
					}
					time.Sleep(50 * time.Millisecond) // the stream elects a new leader
				}
			}
		})
	}
	wg.Wait()
	<-killed
	if err := cluster.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	all, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range all {
		seen[r.Event.ID()]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s is in the stream %d times", id, n)
		}
	}
	for w := range writers {
		for i := range perWriter {
			id := fmt.Sprintf("w%d-%03d", w, i)
			if seen[id] == 0 {
				t.Errorf("%s (acknowledged %d times) is not in the stream", id, acked[id])
			}
		}
	}
	if len(all) != writers*perWriter {
		t.Errorf("the stream holds %d events, want %d", len(all), writers*perWriter)
	}
	// b's follower of appends survived the loss: another replica's
	// append wakes b's readers.
	other := open(t, o)
	woken := b.Changed()
	if _, err := other.Append(ctx, event(t, "after")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Error("another replica's append after the node's return did not wake b's readers")
	}
	t.Logf("killed n%d, the stream's leader; %d events appended, %d acknowledged on the first try or a retry", leader+1, len(all), len(acked))
}

// streamLeader is the index of the node leading stream.
func streamLeader(ctx context.Context, t *testing.T, stream string) int {
	t.Helper()
	nc, err := nats.Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream %s's info: %v", stream, err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(info.Cluster.Leader, "n"))
	if err != nil {
		t.Fatalf("leader %q is not a node of natstest", info.Cluster.Leader)
	}
	return n - 1
}
