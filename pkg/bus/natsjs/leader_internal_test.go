package natsjs

import (
	"context"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// leaderAhead asks the stream's leader for the first record after a
// position, at most every leaderEvery per subject: a record another
// replica appended is found and becomes the subject's known end; asked
// again at once, it asks nothing; past the record, it finds nothing.
func TestLeaderAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := natstest.Start(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	o := Options{Stream: "LEADER", Subject: "leader.events", Replicas: 1, Partitions: 2, PartitionKey: func(e cloudevents.Event) string { return e.ID() }}
	open := func() *Bus {
		t.Helper()
		nc, err := nats.Connect(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(ctx, nc, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(); nc.Close() })
		return b
	}
	reader, writer := open(), open()
	e, err := events.New("ahead", "/natsjs", "dev.flotilla.natsjs.v1", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := writer.Append(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	seq, subject := recs[0].Seq, writer.subjectOf(e)

	if got := reader.leaderAhead(ctx, subject, 0); got != seq {
		t.Errorf("leaderAhead(%s, 0) = %d, want %d, the other replica's append", subject, got, seq)
	}
	reader.mu.Lock()
	high := reader.highOfSub[subject]
	reader.mu.Unlock()
	if high < seq {
		t.Errorf("the subject's known end is %d after the leader answered %d", high, seq)
	}
	if got := reader.leaderAhead(ctx, subject, 0); got != 0 {
		t.Errorf("asked again within %s: %d, want 0 (not asked)", leaderEvery, got)
	}
	if got := reader.leaderAhead(ctx, "", 0); got != seq {
		t.Errorf("leaderAhead of any subject = %d, want %d (asked once for that filter)", got, seq)
	}
	reader.mu.Lock()
	reader.leaderAsked[subject] = time.Time{}
	reader.mu.Unlock()
	if got := reader.leaderAhead(ctx, subject, seq); got != 0 {
		t.Errorf("leaderAhead(%s, %d) = %d, want 0: nothing after the last record", subject, seq, got)
	}
	other := writer.subject((partition(e.ID(), o.Partitions) + 1) % o.Partitions)
	if got := reader.leaderAhead(ctx, other, 0); got != 0 {
		t.Errorf("leaderAhead of the other partition's subject %s = %d, want 0", other, got)
	}
}
