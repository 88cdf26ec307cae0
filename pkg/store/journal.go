package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// maxIDLen bounds an event id (the log stores its length in 16 bits).
const maxIDLen = 32 << 10

// maxBatch bounds how many Append calls share one commit, so one commit's
// latency stays bounded under a flood.
const maxBatch = 1024

// Record is a journaled event and its sequence number (the bus port's
// record: the store is the embedded adapter of pkg/bus).
type Record = bus.Record

// appendReq is one Append call waiting for the writer.
type appendReq struct {
	evs  []cloudevents.Event
	raw  [][]byte
	done chan appendResult // buffered, so the writer never blocks on it
}

type appendResult struct {
	recs []Record
	err  error
}

// Append journals evs and returns the records it added, in order. It returns
// only after they are committed and fsync'd. An event whose id is already
// journaled, or repeated earlier in evs, is skipped and not returned. Every
// event is validated first, and must read back as it was (its time within
// years 0000-9999 in UTC, its data what its content type says, ...); if
// one does not, the call fails with a permanent error (see
// [fault.IsPermanent]) and nothing is written.
//
// Concurrent calls share commits. If ctx ends while the call waits for its
// commit, Append returns ctx's error, but the events may still be journaled:
// a retry is de-duplicated by id.
func (s *Store) Append(ctx context.Context, evs ...cloudevents.Event) ([]Record, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	start := s.now()
	raw, err := encodeEvents(evs)
	if err != nil {
		return nil, fmt.Errorf("appending events: %w", err)
	}
	req := &appendReq{evs: evs, raw: raw, done: make(chan appendResult, 1)}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("appending events: %w", err)
	}
	select {
	case s.appends <- req:
	case <-s.closing:
		return nil, fmt.Errorf("appending events: %w", ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("appending events: %w", ctx.Err())
	}
	select {
	case res := <-req.done:
		if res.err != nil {
			return nil, fmt.Errorf("appending events: %w", res.err)
		}
		s.metrics.appendTook(s.now().Sub(start).Seconds())
		return res.recs, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("appending events (they may still be journaled): %w", ctx.Err())
	}
}

// writer is the single goroutine that journals events: it owns the event
// log, the sequence and the id index. It takes every Append waiting at the
// time into one commit (group commit) of one write and one fdatasync; while
// a commit syncs, the next batch queues up. Under contention (the last commit
// carried more than one request) it also waits up to the commit delay for
// more requests before committing, as databases do (PostgreSQL's
// commit_delay): every sync costs the kernel time, so fewer, fuller syncs
// serve more webhooks. An idle store commits at once.
func (s *Store) writer() {
	defer s.writerWG.Done()
	batch := make([]*appendReq, 0, maxBatch)
	var timer *time.Timer
	prev := 0
	for {
		select {
		case <-s.closing:
			return
		case req := <-s.appends:
			batch = append(batch[:0], req)
		}
		batch = s.drain(batch)
		if s.commitDelay > 0 && prev > 1 && len(batch) < maxBatch {
			if timer == nil {
				timer = time.NewTimer(s.commitDelay)
			} else {
				timer.Reset(s.commitDelay)
			}
			batch = s.gather(batch, timer.C, lingerTarget(prev))
			timer.Stop()
		}
		s.commit(batch)
		prev = len(batch)
		clear(batch)
	}
}

// drain adds the requests already waiting to batch.
func (s *Store) drain(batch []*appendReq) []*appendReq {
	for len(batch) < maxBatch {
		select {
		case req := <-s.appends:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// gather adds requests to batch until it has target of them or deadline
// fires.
func (s *Store) gather(batch []*appendReq, deadline <-chan time.Time, target int) []*appendReq {
	for len(batch) < target {
		select {
		case req := <-s.appends:
			batch = append(batch, req)
		case <-deadline:
			return batch
		case <-s.closing:
			return batch
		}
	}
	return batch
}

// lingerTarget is how many requests the writer waits for after a commit of
// prev requests.
func lingerTarget(prev int) int { return min(2*prev, maxBatch) }

// commit numbers the batch's new events, writes and syncs them, and answers
// every request in it.
func (s *Store) commit(batch []*appendReq) {
	if err := s.Err(); err != nil {
		s.fail(batch, err)
		return
	}
	results := make([]appendResult, len(batch))
	clear(s.pending)
	recs := s.recs[:0]
	seq := s.journal.lastSeq()
	dups := 0
	keys := s.keys[:0]
	s.idsMu.RLock()
	for i, req := range batch {
		for j, e := range req.evs {
			id := e.ID()
			k := keyOf(id)
			if _, dup := s.pending[k]; dup {
				dups++
				continue
			}
			if s.ids.has(k) {
				dups++
				continue
			}
			seq++
			s.pending[k] = struct{}{}
			keys = append(keys, k)
			recs = append(recs, logRecord{seq: seq, id: id, raw: req.raw[j]})
			results[i].recs = append(results[i].recs, Record{Seq: seq, Event: e})
		}
	}
	s.idsMu.RUnlock()
	s.keys = keys
	s.recs = recs
	start := time.Now()
	if err := s.journal.append(recs); err != nil {
		// What reached the disk is unknown (a failed fsync may have dropped
		// pages): stop journaling rather than acknowledge on top of it.
		stopped := fmt.Errorf("journal stopped after a write failure, restart flotilla: %w", err)
		s.broken.Store(&stopped)
		s.logger.Error("journal write failed", "requests", len(batch), "error", err)
		s.fail(batch, err)
		return
	}
	s.logger.Debug("committed journal batch", "requests", len(batch), "events", len(recs), "duration", time.Since(start))
	s.metrics.committed(len(recs), dups)
	if len(recs) > 0 {
		first, now := s.journal.lastSegment(), s.clock()
		s.idsMu.Lock()
		for _, k := range keys {
			s.ids.add(first, now, k)
		}
		s.idsMu.Unlock()
		s.notify()
	}
	for i, req := range batch {
		req.done <- results[i]
	}
}

func (s *Store) fail(batch []*appendReq, err error) {
	for _, req := range batch {
		req.done <- appendResult{err: err}
	}
}

// encodeEvents validates and encodes events for the journal. Every event
// must read back as it was given: one that the journal stored but could not
// decode (a time beyond year 9999, data that is not the JSON its content
// type says) would stop its readers at every start. A refusal is permanent
// (bad input that retrying cannot fix; the intake answers 400), and the
// whole call fails, so nothing is written.
func encodeEvents(evs []cloudevents.Event) ([][]byte, error) {
	raw := make([][]byte, len(evs))
	for i, e := range evs {
		id := e.ID()
		if len(id) > maxIDLen {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q): id is longer than the limit of %d bytes (%d)", i, shortID(id), maxIDLen, len(id)))
		}
		if err := e.Validate(); err != nil {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q): %w", i, shortID(id), err))
		}
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("encoding event %d (id %q): %w", i, shortID(id), err))
		}
		if err := readsBack(e, b); err != nil {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q) would not read back from the journal: %w", i, shortID(id), err))
		}
		raw[i] = b
	}
	return raw, nil
}

// shortID is id cut to a length fit for an error message.
func shortID(id string) string {
	const n = 64
	if len(id) <= n {
		return id
	}
	return id[:n] + "..."
}

// decodeEvent decodes an event as the journal stores it, the one decoding
// that both Append's check and Read use, so that what one accepts the other
// reads. It decodes the JSON once, with the SDK's decoder (json.Unmarshal
// would scan it twice more before calling it).
func decodeEvent(raw []byte) (cloudevents.Event, error) {
	var e cloudevents.Event
	if err := e.UnmarshalJSON(raw); err != nil {
		return cloudevents.Event{}, fmt.Errorf("decoding: %w", err)
	}
	return e, nil
}

// readsBack checks that raw, the encoding of e (a valid event), decodes to
// e: the same attributes, time, extensions and data; so it is valid too.
func readsBack(e cloudevents.Event, raw []byte) error {
	d, err := decodeEvent(raw)
	if err != nil {
		return err
	}
	if d.Context == nil {
		return errors.New("it reads back without attributes")
	}
	for _, a := range [...]struct{ name, want, got string }{
		{"id", e.ID(), d.ID()},
		{"source", e.Source(), d.Source()},
		{"type", e.Type(), d.Type()},
		{"specversion", e.SpecVersion(), d.SpecVersion()},
		{"subject", e.Subject(), d.Subject()},
		{"datacontenttype", e.DataContentType(), d.DataContentType()},
		{"dataschema", e.DataSchema(), d.DataSchema()},
	} {
		if a.want != a.got {
			return fmt.Errorf("its %s %q reads back as %q", a.name, shortID(a.want), shortID(a.got))
		}
	}
	if !e.Time().Equal(d.Time()) {
		return fmt.Errorf("its time %s reads back as %s", e.Time().UTC().Format(time.RFC3339Nano), d.Time().UTC().Format(time.RFC3339Nano))
	}
	if err := sameExtensions(extensionsOf(e), extensionsOf(d)); err != nil {
		return err
	}
	want, got := e.Data(), d.Data()
	if !e.DataBase64 && writtenAsJSON(e.DataContentType()) {
		// Written as it is into the JSON, where the SDK's decoder skips
		// it leniently: it must be JSON, and blanks around it are not kept.
		if len(want) > 0 && !json.Valid(want) {
			return fmt.Errorf("its data (%d bytes) is not the JSON its content type %q says", len(want), e.DataContentType())
		}
		want = bytes.Trim(want, " \t\r\n")
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("its data (%d bytes, %s) does not read back as it was", len(e.Data()), e.DataContentType())
	}
	return nil
}

// extensionsOf returns e's extensions, without the copy Extensions makes
// where it can.
func extensionsOf(e cloudevents.Event) map[string]any {
	if c, ok := e.Context.(*event.EventContextV1); ok {
		return c.Extensions
	}
	return e.Extensions()
}

func sameExtensions(want, got map[string]any) error {
	if len(want) != len(got) {
		return fmt.Errorf("its %d extensions read back as %d", len(want), len(got))
	}
	for name, v := range want {
		w, err := types.Format(v)
		if err != nil {
			return fmt.Errorf("extension %q: %w", name, err)
		}
		g, err := types.Format(got[name])
		if err != nil || g != w {
			return fmt.Errorf("its extension %q does not read back as it was", name)
		}
	}
	return nil
}

// writtenAsJSON tells whether the SDK writes data of this content type into
// the event's JSON as it is, rather than as a string (as its WriteJson
// derives the media type).
func writtenAsJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "", event.ApplicationJSON, event.TextJSON, event.ApplicationCloudEventsJSON, event.ApplicationCloudEventsBatchJSON:
		return true
	}
	return false
}

func (s *Store) notify() {
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// Changed returns a channel that is closed at the next Append that adds
// records. Take the channel before reading, then wait on it, so no append
// falls in between:
//
//	ch := s.Changed()
//	recs, err := s.Read(ctx, cursor, 100)
//	if len(recs) == 0 { <-ch }
func (s *Store) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

// Err returns why the journal stopped taking appends (a write or sync
// failed; reopening the store recovers it), or nil while it works. Health
// checks report it, so that a supervisor restarts flotilla.
func (s *Store) Err() error {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// LastSeq returns the sequence number of the last journaled event, 0 if none.
func (s *Store) LastSeq() uint64 { return s.journal.lastSeq() }

// Read returns up to limit records with Seq > after, in ascending order. A
// limit <= 0 means no limit. A record that is intact on disk but not a
// readable event is returned with its Err set rather than failing the call;
// a record damaged on disk fails it.
func (s *Store) Read(ctx context.Context, after uint64, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	var recs []Record
	err := s.journal.read(after, limit, func(seq uint64, raw []byte) error {
		e, err := decodeEvent(raw)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			// Intact on disk but not an event: the reader quarantines it.
			recs = append(recs, Record{Seq: seq, Err: fmt.Errorf("event %d does not read back: %w", seq, err)})
			return nil
		}
		recs = append(recs, Record{Seq: seq, Event: e})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	return recs, nil
}

// Has reports whether an event with id is journaled, within the dedupe
// window (see [WithDedupeWindow]).
func (s *Store) Has(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("looking up event %q: %w", id, err)
	}
	k := keyOf(id)
	s.idsMu.RLock()
	found := s.ids.has(k)
	s.idsMu.RUnlock()
	return found, nil
}
