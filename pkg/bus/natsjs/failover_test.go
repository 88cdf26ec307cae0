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

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
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

// With the stream's leader killed and not yet back, a replica's readers
// and timers still hear of another replica's appends and timers: its
// follower of appends and its watch of the timers lived on the lost node
// or lost their server, and a reader never waits on them alone.
func TestReadersAndTimersGoOnWhileANodeIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a NATS node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := newOptions()
	b := open(t, o)
	leader := streamLeader(ctx, t, o.Stream)
	// a is connected to the node about to die, as a replica whose NATS
	// pod goes away is.
	urls := []string{cluster.NodeURL(leader)}
	for i := range 3 {
		if i != leader {
			urls = append(urls, cluster.NodeURL(i))
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	a, err := natsjs.Open(ctx, nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); nc.Close() })
	cluster.Kill(leader)
	t.Cleanup(func() {
		if err := cluster.Restart(context.Background(), leader); err != nil {
			t.Error(err)
		}
	})
	woken := a.Changed()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := b.Append(ctx, event(t, "while-down"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no append while n%d is down: %v", leader+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("another replica's append while a node is down did not wake the readers")
	}
	recs, err := a.Read(ctx, 0, 0)
	if err != nil || len(recs) != 1 || recs[0].Event.ID() != "while-down" {
		t.Fatalf("Read = %v, %v", ids(recs), err)
	}
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for {
		err := b.Schedule(ctx, events.At(event(t, "deadline"), due))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no timer scheduled while n%d is down: %v", leader+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		next, ok, err := a.NextDue(ctx)
		if err == nil && ok && next.Equal(due) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica's timer is not in the index: NextDue = %v, %v, %v", next, ok, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With two of the three nodes gone the stream has no quorum and may leave
// a publish unanswered: an Append still returns, failed, within the bound
// of one publish (publishTimeout, 10 s), however long its caller would
// wait, and once the nodes are back the caller's retry with the same id
// stores the event once.
func TestAnAppendWithoutQuorumFailsWithinItsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("kills two NATS nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := newOptions()
	b := open(t, o)
	leader := streamLeader(ctx, t, o.Stream)
	var gone []int
	for i := range 3 {
		if i != leader {
			cluster.Kill(i)
			gone = append(gone, i)
		}
	}
	restart := func() {
		for _, i := range gone {
			if err := cluster.Restart(context.Background(), i); err != nil {
				t.Error(err)
			}
		}
		gone = nil
	}
	t.Cleanup(restart)
	start := time.Now()
	_, err := b.Append(ctx, event(t, "no-quorum"))
	took := time.Since(start)
	t.Logf("Append without quorum: %v after %s", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("Append without quorum succeeded")
	}
	if took > 15*time.Second {
		t.Errorf("Append without quorum returned after %s, want within the 10 s publish bound", took)
	}
	restart()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.Append(actx, event(t, "no-quorum"))
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no append after the nodes came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	recs, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(recs); len(got) != 1 || got[0] != "no-quorum" {
		t.Errorf("the stream holds %v, want no-quorum once", got)
	}
}
