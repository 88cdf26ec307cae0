package intake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Media types of CNCF distribution notification envelopes.
const (
	distributionEventsV1 = "application/vnd.docker.distribution.events.v1+json"
	distributionEventsV2 = "application/vnd.docker.distribution.events.v2+json"
)

// manifestMediaTypes are the targets that can carry a tag. Everything else a
// registry reports as "push" is a blob.
var manifestMediaTypes = map[string]bool{
	"application/vnd.docker.distribution.manifest.v2+json":      true,
	"application/vnd.docker.distribution.manifest.list.v2+json": true,
	"application/vnd.oci.image.manifest.v1+json":                true,
	"application/vnd.oci.image.index.v1+json":                   true,
}

// DistributionSender reads the notifications of the CNCF distribution
// registry (registry:2 / v3, Debian's docker-registry). One request carries a
// batch of events; each manifest pushed by tag becomes a [TypeImagePushed].
//
// Authentication: the registry's endpoint config sends a static header,
// by default "Authorization: Bearer <secret>" (see [checkHeaderToken] for the
// forms accepted; ReceiverConfig.Header picks another header).
type DistributionSender struct {
	// Secret is the receiver's secret.
	Secret string
	// Header carries the secret. Default "Authorization".
	Header string
}

type distributionEnvelope struct {
	Events []distributionEvent `json:"events"`
}

type distributionEvent struct {
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Action    string `json:"action"`
	Target    struct {
		MediaType  string `json:"mediaType"`
		Digest     string `json:"digest"`
		Repository string `json:"repository"`
		URL        string `json:"url"`
		Tag        string `json:"tag"`
	} `json:"target"`
	Request struct {
		Host string `json:"host"`
	} `json:"request"`
	Actor struct {
		Name string `json:"name"`
	} `json:"actor"`
}

func newDistributionSender(rc ReceiverConfig) (Sender, error) {
	return DistributionSender{Secret: rc.Secret, Header: rc.Header}, nil
}

// Authenticate implements [Sender].
func (s DistributionSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, cmp.Or(s.Header, "Authorization"), s.Secret)
}

// Parse implements [Sender].
func (DistributionSender) Parse(d *Delivery) (Result, error) {
	mt, err := mediaType(d)
	if err != nil {
		return Result{}, err
	}
	switch mt {
	case distributionEventsV1, distributionEventsV2, "application/json":
	default:
		return Result{}, fault.Permanent(fmt.Errorf("%w %q: want %s", ErrUnsupportedMediaType, mt, distributionEventsV2))
	}
	var env distributionEnvelope
	if err := json.Unmarshal(d.Body, &env); err != nil {
		return Result{}, malformed("decoding distribution envelope: %w", err)
	}
	if env.Events == nil {
		return Result{}, malformed("decoding distribution envelope: no events field")
	}

	var res Result
	var skipped skipReasons
	for i := range env.Events {
		ev := &env.Events[i]
		if reason := ev.skipReason(); reason != "" {
			skipped.add(reason)
			continue
		}
		e, err := ev.toEvent(d)
		if err != nil {
			return Result{}, fmt.Errorf("distribution event %d: %w", i, err)
		}
		res.Events = append(res.Events, e)
	}
	if len(res.Events) == 0 {
		res.Ignored = skipped.String(len(env.Events))
	}
	return res, nil
}

// skipReason says why ev carries no tagged image, or "" when it does.
func (ev *distributionEvent) skipReason() string {
	switch {
	case ev.Action != "push":
		if ev.Action == "" {
			return "no action"
		}
		return ev.Action
	case !manifestMediaTypes[ev.Target.MediaType]:
		return "blob push"
	case ev.Target.Tag == "":
		return "untagged manifest push"
	}
	return ""
}

func (ev *distributionEvent) toEvent(d *Delivery) (cloudevents.Event, error) {
	registry := ev.Request.Host
	if registry == "" && ev.Target.URL != "" {
		if u, err := url.Parse(ev.Target.URL); err == nil {
			registry = u.Host
		}
	}
	if registry == "" {
		return cloudevents.Event{}, malformed("no registry host in request.host or target.url")
	}
	if ev.Target.Repository == "" {
		return cloudevents.Event{}, malformed("no target.repository")
	}
	id := ev.ID
	if id == "" {
		// Every distribution version sets an id; without one, a hash of
		// the event still lets a redelivery dedupe.
		raw, err := json.Marshal(ev)
		if err != nil {
			return cloudevents.Event{}, malformed("encoding distribution event: %w", err)
		}
		sum := sha256.Sum256(raw)
		id = "sha256-" + hex.EncodeToString(sum[:])
	}
	p := events.ImagePushed{
		Registry:   registry,
		Repository: ev.Target.Repository,
		Tag:        ev.Target.Tag,
		Digest:     ev.Target.Digest,
		MediaType:  ev.Target.MediaType,
		Pusher:     ev.Actor.Name,
		Sender:     SenderDistribution,
		Receiver:   d.Receiver,
		DeliveryID: ev.ID,
	}
	e, err := events.New(d.Receiver+"/"+SenderDistribution+"/"+id, hookSource(d.Receiver), events.TypeImagePushed, p)
	if err != nil {
		return e, err
	}
	e.SetSubject(p.Image() + ":" + p.Tag)
	// The timestamp is informative only: a malformed one is not worth
	// refusing a push for.
	ts, _ := time.Parse(time.RFC3339Nano, ev.Timestamp)
	e.SetTime(eventTime(ts, d))
	return e, nil
}

// skipReasons counts why events of a batch were skipped, in order of first
// appearance.
type skipReasons struct {
	order  []string
	counts map[string]int
}

func (s *skipReasons) add(reason string) {
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	if s.counts[reason] == 0 {
		s.order = append(s.order, reason)
	}
	s.counts[reason]++
}

// String reads e.g. "3 events: blob push (2), pull".
func (s *skipReasons) String(total int) string {
	noun := "events"
	if total == 1 {
		noun = "event"
	}
	if total == 0 {
		return "0 events"
	}
	parts := make([]string, 0, len(s.order))
	for _, r := range s.order {
		if n := s.counts[r]; n > 1 {
			parts = append(parts, fmt.Sprintf("%s (%d)", r, n))
		} else {
			parts = append(parts, r)
		}
	}
	return fmt.Sprintf("%d %s: %s", total, noun, strings.Join(parts, ", "))
}
