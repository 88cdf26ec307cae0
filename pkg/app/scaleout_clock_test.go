package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Scale-out mode runs on the engine's clock (Options.Clock), as the
// embedded store does, on a real JetStream cluster: retention retires what
// is older than the retention on that clock, a deadline due before the
// clock's now is journaled at once and one due after it waits as a timer,
// and the state dates a rollout by it. Catches openScaleOut opening the
// state without the clock (natskv.Open's nil: the wall clock) and a bus
// whose Schedule or RunRetention reads time.Now: a virtual clock a week
// ahead would keep the events (retention), hold the first deadline as a
// timer and date the rollout today.
func TestScaleOutFollowsTheClock(t *testing.T) {
	ctx := t.Context()
	cfg := testConfig(t, fmt.Sprintf("  bus: {url: %q, stream: CLOCK, partitions: 1, replica: a}\n", natsCluster.URL()))
	wall := time.Now().UTC().Truncate(time.Second)
	clock := dispatch.NewManualClock(wall)
	log := slog.New(slog.DiscardHandler)
	so, err := openScaleOut(ctx, cfg.Server, clock, log)
	if err != nil {
		t.Fatal(err)
	}
	defer so.close()
	ev := func(id string) cloudevents.Event {
		t.Helper()
		e, err := events.New(id, "/test", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: "r1", Cluster: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	read := func() []string {
		t.Helper()
		recs, err := so.bus.Read(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return recordIDs(recs)
	}

	// Retention: e1 and e2 read by the partition's dispatcher (e2 stays,
	// a partition's last event), a week's retention checked every 20 ms.
	if _, err := so.bus.Append(ctx, ev("e1"), ev("e2")); err != nil {
		t.Fatal(err)
	}
	view, err := so.bus.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.SetCursor(ctx, "dispatch", 2); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- so.bus.RunRetention(rctx, 7*24*time.Hour, 20*time.Millisecond, log) }()
	defer func() {
		stop()
		<-done
	}()
	time.Sleep(300 * time.Millisecond) // fifteen passes at the clock's now: nothing is a week old
	if diff := cmp.Diff([]string{"e1", "e2"}, read()); diff != "" {
		t.Fatalf("retired before the retention passed on the clock (-want +got):\n%s", diff)
	}
	clock.Set(wall.Add(8 * 24 * time.Hour))
	for deadline := time.Now().Add(10 * time.Second); slices.Contains(read(), "e1"); {
		if time.Now().After(deadline) {
			t.Fatalf("e1 is still there 10 s after the clock passed its retention: %v", read())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Deadlines: one due tomorrow on the wall clock is past on the
	// engine's (a week ahead), one due an hour after the engine's now is
	// a timer.
	now := clock.Now()
	past, later := events.At(ev("due-past"), wall.Add(24*time.Hour)), events.At(ev("due-later"), now.Add(time.Hour))
	if err := so.bus.Schedule(ctx, past, later); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Contains(got, "due-past") || slices.Contains(got, "due-later") {
		t.Errorf("journaled %v: want due-past journaled at once and due-later kept as a timer", got)
	}
	if due, ok, err := so.bus.NextDue(ctx); err != nil || !ok || !due.Equal(now.Add(time.Hour)) {
		t.Errorf("NextDue = %v, %t, %v; want %v", due, ok, err, now.Add(time.Hour))
	}

	// The state dates a rollout on the clock.
	if _, err := so.repo.Create(ctx, rollout.Rollout{ID: "r1", Application: "podinfo"}); err != nil {
		t.Fatal(err)
	}
	ro, err := so.repo.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !ro.Created.Equal(now) {
		t.Errorf("rollout created at %v, want the clock's %v", ro.Created, now)
	}
}

func recordIDs(recs []bus.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Event.ID())
	}
	return out
}
