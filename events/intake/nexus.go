package intake

import (
	"cmp"
	"context"
	"crypto/sha1" // Nexus signs with HMAC-SHA1, which does not rely on collision resistance.
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// SenderNexus is the sender type of Sonatype Nexus Repository 3 webhooks.
const SenderNexus = "nexus"

const (
	nexusIDHeader        = "X-Nexus-Webhook-Id"
	nexusDeliveryHeader  = "X-Nexus-Webhook-Delivery"
	nexusSignatureHeader = "X-Nexus-Webhook-Signature"
	// nexusComponentWebhook is the repository webhook of component events.
	nexusComponentWebhook = "rm:repository:component"
	nexusDockerFormat     = "docker"
)

// NexusSender reads the "component" repository webhook of Nexus Repository
// 3 (X-Nexus-Webhook-Id rm:repository:component). A Docker component created
// or updated (a tag pushed) becomes a [TypeImagePushed]; deleted and purged
// components, other formats and other webhooks are ignored.
//
// Nexus does not name the registry host (the Docker connector's) nor the
// digest: the host comes from ReceiverConfig.Registry, and the digest must be
// resolved at the registry.
//
// Authentication: X-Nexus-Webhook-Signature is the hex HMAC-SHA1 of the raw
// body keyed with the webhook's secret key.
type NexusSender struct {
	// Secret is the receiver's secret: the webhook capability's secret key.
	Secret string
	// Registry is the host[:port] of the Docker connector of the
	// repositories the webhook watches.
	Registry string
}

// newNexusSender builds the Nexus sender of rc; it needs rc.Registry.
func newNexusSender(rc ReceiverConfig) (Sender, error) {
	if rc.Registry == "" {
		return nil, errors.New("nexus receivers need registry: the host of the Docker connector")
	}
	if strings.Contains(rc.Registry, "://") {
		return nil, fmt.Errorf("registry %q must be the host[:port] of the Docker connector, not a URL", rc.Registry)
	}
	return NexusSender{Secret: rc.Secret, Registry: strings.TrimSuffix(rc.Registry, "/")}, nil
}

type nexusPayload struct {
	// Timestamp is read leniently by [nexusTimestamp].
	Timestamp      json.RawMessage `json:"timestamp"`
	Initiator      string          `json:"initiator"`
	RepositoryName string          `json:"repositoryName"`
	Action         string          `json:"action"`
	Component      *struct {
		Format  string `json:"format"`
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"component"`
}

// Authenticate implements [Sender].
func (s NexusSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHMAC(d, sha1.New, s.Secret, nexusSignatureHeader, d.Header.Get(nexusSignatureHeader), "")
}

// Parse implements [Sender]. The key of the event is the delivery id
// (X-Nexus-Webhook-Delivery), else the hash of the body.
func (s NexusSender) Parse(d *Delivery) (Result, error) {
	webhook := d.Header.Get(nexusIDHeader)
	if webhook == "" {
		return Result{}, malformed("missing " + nexusIDHeader + " header")
	}
	delivery := d.Header.Get(nexusDeliveryHeader)
	res := Result{DeliveryID: delivery}
	if !strings.EqualFold(webhook, nexusComponentWebhook) {
		res.Ignored = "webhook " + webhook
		return res, nil
	}
	mt, err := mediaType(d)
	if err != nil {
		return Result{}, err
	}
	if mt != "application/json" && mt != "" {
		return Result{}, fault.Permanent(fmt.Errorf("%w %q: want application/json", ErrUnsupportedMediaType, mt))
	}
	var p nexusPayload
	if err := json.Unmarshal(d.Body, &p); err != nil {
		return Result{}, malformed("decoding Nexus component event: %w", err)
	}
	if reason, err := p.skipReason(); reason != "" || err != nil {
		res.Ignored = reason
		return res, err
	}
	ip := events.ImagePushed{
		Registry:   s.Registry,
		Repository: strings.Trim(p.Component.Name, "/"),
		Tag:        p.Component.Version,
		Pusher:     nexusUser(p.Initiator),
		Sender:     SenderNexus,
		DeliveryID: delivery,
	}
	e, err := imagePushedEvent(d, cmp.Or(delivery, bodyKey(d)), ip, nexusTimestamp(p.Timestamp))
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// skipReason says why p pushes no Docker tag, "" when it does; an error when
// p cannot be read.
func (p *nexusPayload) skipReason() (string, error) {
	switch p.Action {
	case "":
		return "", malformed("nexus component event has no action")
	case "CREATED", "UPDATED":
	default:
		// DELETED, PURGED (which names component ids only), and whatever
		// comes next.
		return "action " + p.Action, nil
	}
	if p.Component == nil {
		return "", malformed("nexus component event %s has no component", p.Action)
	}
	if p.Component.Format != nexusDockerFormat {
		return "format " + cmp.Or(p.Component.Format, "unknown"), nil
	}
	if strings.Trim(p.Component.Name, "/") == "" {
		return "", malformed("nexus docker component has no name")
	}
	// A tag cannot hold ':'; a version that does is a digest.
	if v := p.Component.Version; v == "" || strings.Contains(v, ":") {
		return "untagged push", nil
	}
	return "", nil
}

// nexusUser is the user of an initiator "<user>/<remote ip>".
func nexusUser(initiator string) string {
	if i := strings.LastIndexByte(initiator, '/'); i > 0 {
		return initiator[:i]
	}
	return initiator
}

// nexusTimestampLayouts are the forms Jackson writes a date in: older
// versions "+0000", newer ones "+00:00". Fractional seconds are accepted
// after the seconds whatever the layout.
var nexusTimestampLayouts = []string{
	"2006-01-02T15:04:05Z0700",
	time.RFC3339,
}

// nexusTimestamp reads the timestamp: a date string, or unix milliseconds.
// It is informative only: zero when absent or unreadable.
func nexusTimestamp(raw json.RawMessage) time.Time {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		ms, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil || ms <= 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms).UTC()
	}
	for _, layout := range nexusTimestampLayouts {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
