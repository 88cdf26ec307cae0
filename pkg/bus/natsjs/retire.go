package natsjs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// Retention as the embedded journal keeps it: an event goes once it is
// older than the retention period AND every consumer that reads it has
// passed it. A stream MaxAge would drop events a follower has not read yet
// (an events sink down for longer than the retention), so Retire purges
// each partition's subject instead, up to the lowest cursor that reads it:
// the cursors of that partition's consumers ("p<N>/..."), and those of the
// consumers of the whole bus (the sinks' mirrors). A partition none of
// whose consumers has saved a cursor keeps every event. The last event of
// each subject is kept too, so that what a reader knows of a subject's end
// (high) is never an event that is gone.

// Retired says what one Retire did.
type Retired struct {
	// Before is the first sequence younger than the retention period.
	Before uint64
	// Purged are the partitions whose older events were purged, each up to
	// (not including) the sequence given.
	Purged map[int]uint64
	// Held names, per partition, the consumer whose cursor kept events
	// older than the retention (the lowest), and its cursor.
	Held map[int]Cursor
}

// Cursor is a consumer's saved position.
type Cursor struct {
	Consumer string
	Seq      uint64
}

// Retire purges what the retention period and the cursors allow, as of
// now. It is safe to run on several replicas at once (a purge is
// idempotent), though one is enough.
func (b *Bus) Retire(ctx context.Context, retention time.Duration, now time.Time) (Retired, error) {
	out := Retired{Purged: map[int]uint64{}, Held: map[int]Cursor{}}
	before, err := b.firstAfter(ctx, now.Add(-retention))
	if err != nil {
		return out, err
	}
	out.Before = before
	info, err := b.stream.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("reading stream %s: %w", b.o.Stream, err)
	}
	if before <= info.State.FirstSeq {
		return out, nil // nothing is older than the retention
	}
	low, err := b.lowestCursors(ctx)
	if err != nil {
		return out, err
	}
	for p := range b.o.Partitions {
		subject := b.subject(p)
		last, err := b.lastOf(ctx, subject)
		if err != nil {
			return out, err
		}
		upTo := min(before, last) // the subject's last event stays
		c, ok := low[p]
		if !ok {
			continue // no consumer of this partition has read it yet
		}
		if c.Seq+1 < upTo {
			upTo = c.Seq + 1
			out.Held[p] = c
		}
		if upTo <= 1 {
			continue
		}
		if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(upTo)); err != nil {
			return out, fmt.Errorf("purging %s below %d: %w", subject, upTo, err)
		}
		out.Purged[p] = upTo
	}
	return out, nil
}

// firstAfter is the sequence of the first event appended at or after t
// (the stream's next sequence when none was).
func (b *Bus) firstAfter(ctx context.Context, t time.Time) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	msgs, err := jetstreamext.GetBatch(ctx, b.js, b.o.Stream, 1, jetstreamext.GetBatchStartTime(t))
	if err != nil {
		return 0, fmt.Errorf("finding the events of stream %s since %s: %w", b.o.Stream, t.Format(time.RFC3339), err)
	}
	for m, err := range msgs {
		if errors.Is(err, jetstreamext.ErrNoMessages) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("finding the events of stream %s since %s: %w", b.o.Stream, t.Format(time.RFC3339), err)
		}
		return m.Sequence, nil
	}
	// None found where the batch was read: any replica of the stream
	// answers it, and one that has not applied the latest appends yet
	// finds none of them. The leader's info says whether the stream's
	// last event is older than t (every event is); if not, nothing is
	// retired this round (before the events read by every cursor were
	// retired so within a second of their append, on a loaded machine).
	info, err := b.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", b.o.Stream, err)
	}
	if info.State.Msgs > 0 && !info.State.LastTime.Before(t) {
		return info.State.FirstSeq, nil
	}
	return info.State.LastSeq + 1, nil
}

// lastOf is the sequence of subject's last event, 0 if it has none.
func (b *Bus) lastOf(ctx context.Context, subject string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	m, err := b.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the last event of %s: %w", subject, err)
	}
	return m.Sequence, nil
}

// lowestCursors returns, per partition, the lowest cursor that reads it:
// its own consumers' and the whole bus's. A partition is missing when none
// of its own consumers saved a cursor.
func (b *Bus) lowestCursors(ctx context.Context) (map[int]Cursor, error) {
	lister, err := b.cursors.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing cursors: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	own := map[int]Cursor{}
	var whole *Cursor
	for _, k := range keys {
		raw, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil {
			continue // not a cursor of ours
		}
		name := string(raw)
		seq, err := b.Cursor(ctx, name)
		if err != nil {
			return nil, err
		}
		c := Cursor{Consumer: name, Seq: seq}
		p, ok := partitionOfCursor(name, b.o.Partitions)
		switch {
		case !ok:
			if whole == nil || seq < whole.Seq {
				whole = &c
			}
		case own[p].Consumer == "" || seq < own[p].Seq:
			own[p] = c
		}
	}
	if whole != nil {
		for p, c := range own {
			if whole.Seq < c.Seq {
				own[p] = *whole
			}
		}
	}
	return own, nil
}

// partitionOfCursor is the partition whose view saved cursor name
// (View.consumer: "p<N>/<name>"), false for a consumer of the whole bus.
func partitionOfCursor(name string, partitions int) (int, bool) {
	rest, ok := strings.CutPrefix(name, "p")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(n)
	if err != nil || p < 0 || p >= partitions {
		return 0, false
	}
	return p, true
}

// RunRetention retires events every interval until ctx ends (in scale-out
// mode, on the replica holding partition 0): those older than the
// retention before the engine's clock (Options.Now; the interval is wall
// time). A consumer holding events past the retention is logged once per
// hour.
func (b *Bus) RunRetention(ctx context.Context, retention, every time.Duration, log *slog.Logger) error {
	warned := map[string]time.Time{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		r, err := b.Retire(ctx, retention, b.o.Now())
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			log.Warn("retiring old events from the stream; trying again", "stream", b.o.Stream, "error", err, "retry_in", every)
		default:
			for p, c := range r.Held {
				if time.Since(warned[c.Consumer]) < time.Hour {
					continue
				}
				warned[c.Consumer] = time.Now()
				log.Warn("a consumer's cursor keeps events past their retention", "consumer", c.Consumer, "partition", p,
					"cursor", c.Seq, "retention", retention)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
