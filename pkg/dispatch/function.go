package dispatch

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Function is one stateless event handler: it consumes some event types and
// returns the events it derives. An error marked fault.Permanent is never
// retried; any other error is retried.
type Function interface {
	Name() string
	Consumes() []string
	Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error)
}

// Selective is a Function that takes only some of the events of a type it
// consumes, and can tell which from the event alone, cheaply (rollback
// takes the ends of revert runs, not of apply runs). An event it does not
// want is not handed to it: not waited for, and free to be folded by a
// Folder consuming it too. Wants must say what Handle would do nothing
// with: an event it may act on, or cannot read, is wanted.
type Selective interface {
	Function
	Wants(e cloudevents.Event) bool
}

// Folder is a Function that can fold a burst of one key's events into one
// call, as observe folds a rollout's canary events into one update of the
// rollout instead of one each: when several events queued on a key are all
// for the Folder alone (no other function consumes them) and none was
// tried yet, the dispatcher hands it up to [MaxFold] of them at once.
//
// HandleFolded handles es, in order, as Handle would one after the other,
// and returns the events derived from each of a prefix of es (out[i] from
// es[i]): it may stop at any event it does not fold, and the dispatcher
// hands that one and the rest to Handle. An error means none of es was
// handled (or any was, idempotently): each is handed to Handle again, one
// at a time, which retries or gives up on it as on any failure.
type Folder interface {
	Function
	HandleFolded(ctx context.Context, es []cloudevents.Event) (out [][]cloudevents.Event, err error)
}

// MaxFold bounds the events of one call to HandleFolded.
const MaxFold = 256
