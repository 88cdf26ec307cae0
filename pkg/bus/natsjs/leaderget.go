package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leaderReads is a bucket whose Get asks its stream's leader. nats.go's
// Get is a direct get when the stream allows them (every bucket it creates
// does), and any replica answers a direct get, one that has not applied a
// write yet included: NATS's KV documentation says reads through direct
// gets do not read your writes, and that sending them to the stream's
// leader does. A stale read decides wrong where no revision-checked write
// follows it (the scale-out downgrade of session 34: a plan that did not
// see the rollout another replica had just ended). So Get sends the
// stream's own get request, which only the leader answers, whatever the
// stream allows: turning direct gets off on the stream instead races with
// nats.go's CreateOrUpdateKeyValue, which turns them on again, and a
// replica that opened the bucket in between would send direct gets no one
// answers. Everything else is the bucket's own (watches read through a
// consumer; readAll waits for the leader's last revision).
type leaderReads struct {
	jetstream.KeyValue
	nc      *nats.Conn
	subject string // the stream's get request: <prefix>STREAM.MSG.GET.KV_<bucket>
	keys    string // the bucket's subject prefix: $KV.<bucket>.
}

// withLeaderReads wraps kv, opened on js, so that Get asks its leader.
func withLeaderReads(js jetstream.JetStream, kv jetstream.KeyValue) jetstream.KeyValue {
	return leaderReads{
		KeyValue: kv,
		nc:       js.Conn(),
		subject:  apiPrefix(js.Options()) + "STREAM.MSG.GET.KV_" + kv.Bucket(),
		keys:     "$KV." + kv.Bucket() + ".",
	}
}

// apiPrefix is the JetStream API's subject prefix o's requests go to.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	default:
		return jetstream.DefaultAPIPrefix
	}
}

// msgGetResponse is the stream's answer to a get (JetStream's
// io.nats.jetstream.api.v1.stream_msg_get_response).
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// Get returns key's last entry as the leader has it; ErrKeyNotFound when
// there is none or it was deleted or purged, as nats.go's Get.
func (l leaderReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if !keyValid(key) {
		return nil, jetstream.ErrInvalidKey
	}
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{l.keys + key})
	if err != nil {
		return nil, err
	}
	msg, err := l.nc.RequestWithContext(ctx, l.subject, req)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("decoding the leader's answer for %s: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	e := entry{bucket: l.Bucket(), key: key, value: resp.Message.Data, revision: resp.Message.Sequence, created: resp.Message.Time, op: jetstream.KeyValuePut}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, fmt.Errorf("decoding the headers of %s: %w", key, err)
		}
		e.op = operation(h)
	}
	if e.op != jetstream.KeyValuePut {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, nil
}

// operation is what a bucket's message records, by its headers, as
// nats.go reads them: KV-Operation (a Delete or Purge), or the marker a
// stream writes when a key's entry aged out or was removed.
func operation(h nats.Header) jetstream.KeyValueOp {
	switch op := h.Get("KV-Operation"); {
	case op == "DEL":
		return jetstream.KeyValueDelete
	case op == "PURGE":
		return jetstream.KeyValuePurge
	case op != "":
		return jetstream.KeyValuePut
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// validKey is the keys nats.go's Get takes.
var validKey = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func keyValid(key string) bool {
	return validKey.MatchString(key) && key[0] != '.' && key[len(key)-1] != '.' && !strings.Contains(key, "..")
}

// entry is a bucket's entry read from its leader.
type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e entry) Bucket() string                  { return e.bucket }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return e.value }
func (e entry) Revision() uint64                { return e.revision }
func (e entry) Created() time.Time              { return e.created }
func (e entry) Delta() uint64                   { return 0 }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }
