package intake

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderACR is the sender type of Azure Container Registry webhooks.
const SenderACR = "acr"

// ACRSender reads Azure Container Registry webhooks. Each request carries one
// event, shaped like a CNCF distribution event but not enveloped; a manifest
// pushed by tag becomes a [TypeImagePushed]. Pings, untagged pushes, deletes,
// Helm chart pushes and deletes, and quarantine events are ignored.
//
// Authentication: an ACR webhook sends the custom headers it is configured
// with and no signature. Configure "Authorization: Bearer <secret>" (see
// [checkHeaderToken] for the forms accepted; ReceiverConfig.Header picks
// another header).
type ACRSender struct {
	// Secret is the receiver's secret.
	Secret string
	// Header carries the secret. Default "Authorization".
	Header string
}

func newACRSender(rc ReceiverConfig) (Sender, error) {
	return ACRSender{Secret: rc.Secret, Header: rc.Header}, nil
}

type acrEvent struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Action    string `json:"action"`
	Target    struct {
		MediaType  string `json:"mediaType"`
		Digest     string `json:"digest"`
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"target"`
	Request struct {
		Host string `json:"host"`
	} `json:"request"`
}

// Authenticate implements [Sender].
func (s ACRSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, cmp.Or(s.Header, "Authorization"), s.Secret)
}

// Parse implements [Sender].
func (ACRSender) Parse(d *Delivery) (Result, error) {
	if err := checkJSONHookMediaType(d); err != nil {
		return Result{}, err
	}
	var ev acrEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return Result{}, malformed("decoding ACR event: %w", err)
	}
	if ev.Action == "" {
		return Result{}, malformed("ACR event has no action")
	}
	res := Result{DeliveryID: ev.ID}
	if reason := ev.skipReason(); reason != "" {
		res.Ignored = reason
		return res, nil
	}
	if ev.Request.Host == "" {
		return Result{}, malformed("ACR push has no request.host")
	}
	if ev.Target.Repository == "" {
		return Result{}, malformed("ACR push has no target.repository")
	}
	p := events.ImagePushed{
		Registry:   ev.Request.Host,
		Repository: ev.Target.Repository,
		Tag:        ev.Target.Tag,
		Digest:     ev.Target.Digest,
		MediaType:  ev.Target.MediaType,
		Sender:     SenderACR,
		DeliveryID: ev.ID,
	}
	// The timestamp is informative only: a malformed one is not worth
	// refusing a push for.
	at, _ := time.Parse(time.RFC3339Nano, ev.Timestamp)
	e, err := imagePushedEvent(d, cmp.Or(ev.ID, bodyKey(d)), p, at)
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// skipReason says why ev carries no tagged image, or "" when it does. A push
// without a media type is taken as a manifest push: only manifests are
// tagged.
func (ev *acrEvent) skipReason() string {
	switch {
	case ev.Action != "push":
		// ping, delete, chart_push, chart_delete, quarantine, ...
		return ev.Action
	case ev.Target.MediaType != "" && !manifestMediaTypes[ev.Target.MediaType]:
		return fmt.Sprintf("push of %s", ev.Target.MediaType)
	case ev.Target.Tag == "":
		return "untagged push"
	}
	return ""
}
