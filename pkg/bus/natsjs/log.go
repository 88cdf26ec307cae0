package natsjs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// errContainsDuplicate is JetStream's answer to an atomic batch holding a
// message id it has seen (JSAtomicPublishContainsDuplicateMessageErr).
const errContainsDuplicate jetstream.ErrorCode = 10201

// errDuplicateInProcess is JetStream's answer to a message whose id another
// publish is storing at that moment (JSStreamDuplicateMessageConflict...):
// asked again once that one is stored, it answers "duplicate".
const errDuplicateInProcess jetstream.ErrorCode = 10158

// inProcessTimeout bounds how long a publish waits for another one of the
// same id to be stored.
const inProcessTimeout = 5 * time.Second

// publishTimeout bounds one publish's wait for its acknowledgement. A
// request sent while the stream's leader is being elected (its node
// killed) may never be answered, and nats.go waits for the caller's
// deadline, however far: Append fails after this instead, and its caller's
// retry is de-duplicated by id.
const publishTimeout = 10 * time.Second

func isAPIError(err error, code jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == code
}

// Append publishes evs to the stream and returns the records it added, in
// order, once JetStream acknowledged them (stored on a quorum of the
// stream's replicas). Each event's id is its Nats-Msg-Id: the stream drops
// an id it has within its de-duplication window, and Append does not
// return it. Up to 1,000 events go in one atomic batch (all or none); a
// batch holding an id the stream has already is published one event at a
// time instead, so the others are kept in order and the repeats dropped.
func (b *Bus) Append(ctx context.Context, evs ...cloudevents.Event) ([]bus.Record, error) {
	evs = firstOfEachID(evs)
	if len(evs) == 0 {
		return nil, nil
	}
	raw, err := bus.Encode(evs)
	if err != nil {
		return nil, fmt.Errorf("appending events: %w", err)
	}
	var out []bus.Record
	for start := 0; start < len(evs); start += maxAtomic {
		end := min(start+maxAtomic, len(evs))
		recs, err := b.publish(ctx, evs[start:end], raw[start:end])
		if err != nil {
			return nil, fmt.Errorf("appending events (a retry is de-duplicated by id): %w", classify(err))
		}
		out = append(out, recs...)
	}
	// The events are in: a failure to remember their ids only makes Has
	// answer false, and its caller do its (idempotent) work again.
	_ = b.remember(ctx, out)
	if len(out) > 0 {
		seqs := map[string]uint64{}
		for _, r := range out {
			seqs[b.subjectOf(r.Event)] = r.Seq
		}
		b.appended(seqs)
	}
	return out, nil
}

// publish appends one atomic batch's worth of events.
func (b *Bus) publish(ctx context.Context, evs []cloudevents.Event, raw [][]byte) ([]bus.Record, error) {
	msgs := make([]*nats.Msg, len(evs))
	for i, e := range evs {
		msgs[i] = b.message(e, raw[i])
	}
	if len(msgs) == 1 {
		return b.publishEach(ctx, evs, msgs)
	}
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	ack, err := jetstreamext.PublishMsgBatch(pctx, b.js, msgs)
	cancel()
	switch {
	case isAPIError(err, errContainsDuplicate) || isAPIError(err, errDuplicateInProcess):
		for i, e := range evs {
			msgs[i] = b.message(e, raw[i]) // the batch's headers are gone
		}
		return b.publishEach(ctx, evs, msgs)
	case err != nil:
		return nil, err
	}
	out := make([]bus.Record, len(evs))
	first := ack.Sequence - uint64(len(evs)) + 1
	for i, e := range evs {
		out[i] = bus.Record{Seq: first + uint64(i), Event: e}
	}
	return out, nil
}

// publishEach publishes msgs one after another, keeping those the stream
// did not have.
func (b *Bus) publishEach(ctx context.Context, evs []cloudevents.Event, msgs []*nats.Msg) ([]bus.Record, error) {
	var out []bus.Record
	for i, m := range msgs {
		ack, err := b.publishOne(ctx, m)
		if err != nil {
			return nil, err
		}
		if !ack.Duplicate {
			out = append(out, bus.Record{Seq: ack.Sequence, Event: evs[i]})
		}
	}
	return out, nil
}

// publishOne publishes m, waiting while another publish of its id is in
// process (two replicas firing one timer).
func (b *Bus) publishOne(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	deadline := time.Now().Add(inProcessTimeout)
	for wait := 2 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		ack, err := b.js.PublishMsg(pctx, m)
		cancel()
		if !isAPIError(err, errDuplicateInProcess) || time.Now().After(deadline) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// message is an event as the CloudEvents NATS binding's structured mode
// carries it, on its partition's subject, its id as the message id.
func (b *Bus) message(e cloudevents.Event, raw []byte) *nats.Msg {
	m := nats.NewMsg(b.subjectOf(e))
	m.Header.Set(jetstream.MsgIDHeader, msgID(e.ID()))
	m.Header.Set("Content-Type", event.ApplicationCloudEventsJSON)
	m.Data = raw
	return m
}

// msgID is the Nats-Msg-Id of an event id: the id itself, or a digest of
// one that a header cannot carry as it is (line breaks) or that is long.
func msgID(id string) string {
	if len(id) <= 256 && !strings.ContainsAny(id, "\r\n") {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// firstOfEachID drops the events whose id came earlier in evs.
func firstOfEachID(evs []cloudevents.Event) []cloudevents.Event {
	seen := make(map[string]bool, len(evs))
	out := evs[:0:0]
	for _, e := range evs {
		if !seen[e.ID()] {
			seen[e.ID()] = true
			out = append(out, e)
		}
	}
	return out
}

// classify marks what no retry can fix as permanent: an event larger than
// the server takes.
func classify(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return fault.Permanent(err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code == 400 {
		return fault.Permanent(err)
	}
	return err
}

// catchUpTimeout bounds how long a Read waits for the replica that
// answers it to hold an append this process knows of.
const catchUpTimeout = 2 * time.Second

// Read returns up to limit records with Seq > after, in order (limit <= 0:
// all), by JetStream's direct batch get, which any replica of the stream
// answers. A replica behind an append this process knows of (its own, or
// one its follower saw) is asked again until it has it; one still behind
// after catchUpTimeout fails the Read, to be retried, so that no append a
// reader was woken for goes unread.
func (b *Bus) Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error) {
	return b.read(ctx, "", after, limit)
}

// read reads the records of subject ("": all) after seq.
func (b *Bus) read(ctx context.Context, subject string, after uint64, limit int) ([]bus.Record, error) {
	b.mu.Lock()
	high := b.high
	if subject != "" {
		high = b.highOfSub[subject]
	}
	b.mu.Unlock()
	var out []bus.Record
	deadline := time.Now().Add(catchUpTimeout)
	for {
		want := readBatch
		if limit > 0 {
			want = min(limit-len(out), readBatch)
		}
		if want <= 0 {
			return out, nil
		}
		got, err := b.readBatch(ctx, subject, after, want)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s after %d: %w", b.o.Stream, after, err)
		}
		out = append(out, got...)
		if len(got) > 0 {
			after = got[len(got)-1].Seq
		}
		if len(got) == want {
			continue
		}
		if after >= high || b.expiredUpTo(ctx, high) {
			// What this process knows of the stream's end comes from its
			// follower of appends, which misses what was appended while it
			// was being made again (its node lost). From time to time the
			// leader says whether the replica that answered was behind.
			if seq := b.leaderAhead(ctx, subject, after); seq > after {
				high = seq
				continue
			}
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("reading stream %s: the replica that answered holds up to %d, behind %d", b.o.Stream, after, high)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// leaderEvery is how often a reader asks the stream's leader whether a
// short read missed records (per subject and process).
const leaderEvery = 2 * time.Second

// leaderAhead returns the sequence of the first record of subject ("":
// any) after seq, as the stream's leader answers (not a replica that may
// lag), or 0: none, not asked (asked within leaderEvery), or no answer.
// What it finds becomes the subject's known end.
func (b *Bus) leaderAhead(ctx context.Context, subject string, after uint64) uint64 {
	b.mu.Lock()
	if time.Since(b.leaderAsked[subject]) < leaderEvery {
		b.mu.Unlock()
		return 0
	}
	b.leaderAsked[subject] = time.Now()
	b.mu.Unlock()
	filter := subject
	if filter == "" {
		filter = b.o.Subject + ".*"
	}
	req, err := json.Marshal(map[string]any{"seq": after + 1, "next_by_subj": filter})
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	// The STREAM.MSG.GET API is answered by the leader alone (direct
	// gets, by any replica).
	msg, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+b.o.Stream, req)
	if err != nil {
		return 0
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if json.Unmarshal(msg.Data, &resp) != nil || resp.Message == nil || resp.Message.Seq <= after {
		return 0
	}
	seq := resp.Message.Seq
	b.mu.Lock()
	b.high = max(b.high, seq)
	if subject != "" {
		b.highOfSub[subject] = max(b.highOfSub[subject], seq)
	}
	b.mu.Unlock()
	return seq
}

// readTimeout bounds one direct batch get (a healthy one takes
// milliseconds).
const readTimeout = 5 * time.Second

// expiredUpTo tells whether retention removed every message up to seq
// (then nothing is left to wait for).
func (b *Bus) expiredUpTo(ctx context.Context, seq uint64) bool {
	info, err := b.stream.Info(ctx)
	if err != nil {
		return false
	}
	b.mu.Lock()
	b.first, b.firstAt = info.State.FirstSeq, time.Now()
	b.mu.Unlock()
	return info.State.FirstSeq > seq
}

// readBatch reads up to n records of subject ("": all) after seq.
// A direct batch get waits for the end of its replies: bounded by
// readTimeout, since a reply lost with its server (a node gone mid-read)
// would hold the reader for good.
func (b *Bus) readBatch(ctx context.Context, subject string, after uint64, n int) ([]bus.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	opts := []jetstreamext.GetBatchOpt{jetstreamext.GetBatchSeq(after + 1)}
	if subject != "" {
		opts = append(opts, jetstreamext.GetBatchSubject(subject))
	}
	msgs, err := jetstreamext.GetBatch(ctx, b.js, b.o.Stream, n, opts...)
	if err != nil {
		return nil, err
	}
	var out []bus.Record
	for m, err := range msgs {
		if errors.Is(err, jetstreamext.ErrNoMessages) {
			break
		}
		if err != nil {
			return nil, err
		}
		rec := bus.Record{Seq: m.Sequence}
		rec.Event, rec.Err = bus.Decode(m.Data)
		if rec.Err != nil {
			rec.Event = cloudevents.Event{}
		}
		out = append(out, rec)
	}
	return out, nil
}
