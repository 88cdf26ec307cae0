package natskv

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// slowBucket's reads go unanswered (timeout) or find no responders a few
// times, then answer.
type slowBucket struct {
	jetstream.KeyValue
	errs  []error
	reads int
}

func (b *slowBucket) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	b.reads++
	if len(b.errs) > 0 {
		err := b.errs[0]
		b.errs = b.errs[1:]
		return nil, err
	}
	return nil, jetstream.ErrKeyNotFound
}

// A bucket whose reads time out while the NATS cluster elects leaders (its
// replicas restarting) is waited for: a replica started then used to exit
// with "bucket ..._rollouts: context deadline exceeded" (a scale-out
// rolling restart's CI failure), and with "stream not found" when the
// leader read reached a node the bucket's creation had not (the NATS node
// scenario's CI failure: the error as the leader read returns it, the
// server's API error). An error no wait mends fails at once.
func TestAnswersWaitsOutTimeouts(t *testing.T) {
	notFound := &jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound, Description: "stream not found"}
	b := &slowBucket{errs: []error{context.DeadlineExceeded, nats.ErrNoResponders, nats.ErrTimeout, notFound}}
	if err := answers(t.Context(), b); err != nil || b.reads != 5 {
		t.Errorf("answers = %v after %d reads; want nil after 5", err, b.reads)
	}
	denied := errors.New("nats: permissions violation")
	b = &slowBucket{errs: []error{denied}}
	if err := answers(t.Context(), b); !errors.Is(err, denied) || b.reads != 1 {
		t.Errorf("answers = %v after %d reads; want the permission error at once", err, b.reads)
	}
}
