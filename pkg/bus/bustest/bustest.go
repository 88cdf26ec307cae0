// Package bustest is the contract every adapter of pkg/bus passes: run
// [Run] from the adapter's tests.
package bustest

import (
	"context"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// Open returns a fresh, empty bus for a test, and a function that closes
// it and opens it again on the same data (a restart).
type Open func(t *testing.T) (b bus.Bus, restart func() bus.Bus)

// Run runs the contract against the adapter open makes.
func Run(t *testing.T, open Open) {
	t.Helper()
	t.Run("AppendsInOrderAndReadsAfter", func(t *testing.T) { appendsInOrder(t, open) })
	t.Run("DropsRepeatedIDs", func(t *testing.T) { dropsRepeatedIDs(t, open) })
	t.Run("ChangedWakesAReader", func(t *testing.T) { changedWakes(t, open) })
	t.Run("CursorsSurviveARestart", func(t *testing.T) { cursorsSurvive(t, open) })
	t.Run("TimersFireWhenDueAndSurviveARestart", func(t *testing.T) { timers(t, open) })
}

func event(t *testing.T, id string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, "/bustest", "dev.flotilla.bustest.v1", map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ids(recs []bus.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Event.ID())
	}
	return out
}

func appendsInOrder(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	b, _ := open(t)
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("e%d", i)
		want = append(want, id)
		recs, err := b.Append(ctx, event(t, id))
		if err != nil || len(recs) != 1 {
			t.Fatalf("Append(%s) = %v, %v", id, recs, err)
		}
	}
	all, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ids(all)); diff != "" {
		t.Fatalf("Read (-want +got):\n%s", diff)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Errorf("sequence not increasing: %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
	rest, err := b.Read(ctx, all[1].Seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e2", "e3"}, ids(rest)); diff != "" {
		t.Errorf("Read(after e1, 2) (-want +got):\n%s", diff)
	}
	if got := all[2].Event.Data(); string(got) != string(event(t, "e2").Data()) {
		t.Errorf("e2 reads back with data %s", got)
	}
}

func dropsRepeatedIDs(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	b, _ := open(t)
	recs, err := b.Append(ctx, event(t, "a"), event(t, "b"), event(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(recs)); diff != "" {
		t.Errorf("Append with a repeat (-want +got):\n%s", diff)
	}
	if recs, err = b.Append(ctx, event(t, "b")); err != nil || len(recs) != 0 {
		t.Errorf("Append of a known id = %v, %v; want nothing added", recs, err)
	}
	all, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(all)); diff != "" {
		t.Errorf("bus (-want +got):\n%s", diff)
	}
}

func changedWakes(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	b, _ := open(t)
	ch := b.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any append")
	default:
	}
	if _, err := b.Append(ctx, event(t, "x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed by an append")
	}
}

func cursorsSurvive(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	b, restart := open(t)
	if got, err := b.Cursor(ctx, "c"); got != 0 || err != nil {
		t.Fatalf("Cursor of a new consumer = %d, %v; want 0", got, err)
	}
	if _, err := b.Append(ctx, event(t, "1"), event(t, "2")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCursor(ctx, "c", 2); err != nil {
		t.Fatal(err)
	}
	b = restart()
	if got, err := b.Cursor(ctx, "c"); got != 2 || err != nil {
		t.Errorf("Cursor after a restart = %d, %v; want 2", got, err)
	}
	if got, err := b.Cursor(ctx, "other"); got != 0 || err != nil {
		t.Errorf("another consumer's Cursor = %d, %v; want 0", got, err)
	}
	if err := b.DeleteCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteCursor(ctx, "never-set"); err != nil {
		t.Errorf("DeleteCursor of an unknown consumer = %v, want nil", err)
	}
	b = restart()
	if got, err := b.Cursor(ctx, "c"); got != 0 || err != nil {
		t.Errorf("Cursor after DeleteCursor and a restart = %d, %v; want 0", got, err)
	}
}

func timers(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	b, restart := open(t)
	now := time.Now()
	soon, later := now.Add(time.Hour), now.Add(2*time.Hour)
	ch := b.TimersChanged()
	if err := b.Schedule(ctx, events.At(event(t, "later"), later), events.At(event(t, "soon"), soon),
		events.At(event(t, "soon"), soon), event(t, "now")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("TimersChanged not closed by Schedule")
	}
	all, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"now"}, ids(all)); diff != "" {
		t.Errorf("appended at once (-want +got):\n%s", diff)
	}
	due, ok, err := b.NextDue(ctx)
	if err != nil || !ok || due.Sub(soon).Abs() > time.Millisecond {
		t.Fatalf("NextDue = %v, %v, %v; want %v", due, ok, err, soon)
	}
	if n, err := b.FireDue(ctx, now, 10); n != 0 || err != nil {
		t.Errorf("FireDue before anything is due = %d, %v", n, err)
	}
	b = restart()
	if n, err := b.FireDue(ctx, soon, 10); n != 1 || err != nil {
		t.Errorf("FireDue after a restart, at the first due time = %d, %v; want 1 (one timer scheduled twice)", n, err)
	}
	if n, err := b.FireDue(ctx, later.Add(time.Second), 10); n != 1 || err != nil {
		t.Errorf("FireDue at the second = %d, %v; want 1", n, err)
	}
	if _, ok, err := b.NextDue(ctx); ok || err != nil {
		t.Errorf("NextDue after every timer fired = %v, %v", ok, err)
	}
	all, err = b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"now", "soon", "later"}, ids(all)); diff != "" {
		t.Errorf("bus (-want +got):\n%s", diff)
	}
}
