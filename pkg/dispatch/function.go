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
