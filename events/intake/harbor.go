package intake

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// SenderHarbor is the sender type of Harbor v2 webhooks.
const SenderHarbor = "harbor"

// The Harbor event types that mean "an artifact was pushed", in the Default
// and the CloudEvents payload formats.
const (
	harborPushDefault    = "PUSH_ARTIFACT"
	harborPushCloudEvent = "harbor.artifact.pushed"
	// harborExtOperator is the CloudEvents extension naming who pushed.
	harborExtOperator = "operator"
)

// HarborSender reads the webhooks of a Harbor v2 project policy, in either
// payload format: Default (application/json) or, from Harbor 2.8,
// CloudEvents (structured mode). Each tagged resource of a push becomes a
// [TypeImagePushed]; pulls, deletes, scans, quota and replication events are
// ignored, and so is a push without a tag.
//
// Authentication: Harbor cannot sign. The policy's "auth header" value is
// sent verbatim in the Authorization header (see [checkHeaderToken] for the
// forms accepted; ReceiverConfig.Header picks another header).
type HarborSender struct {
	// Secret is the receiver's secret: the policy's auth header value.
	Secret string
	// Header carries the secret. Default "Authorization".
	Header string
}

// newHarborSender builds the Harbor sender of rc.
func newHarborSender(rc ReceiverConfig) (Sender, error) {
	if rc.Header != "" && !harborIsHeaderName(rc.Header) {
		return nil, fmt.Errorf("header %q is not a valid HTTP header name", rc.Header)
	}
	return HarborSender{Secret: rc.Secret, Header: rc.Header}, nil
}

// harborPayload is the Default payload format.
type harborPayload struct {
	Type string `json:"type"`
	// OccurAt is unix seconds; read leniently by [harborOccurAt].
	OccurAt   json.RawMessage  `json:"occur_at"`
	Operator  string           `json:"operator"`
	EventData *harborEventData `json:"event_data"`
}

// harborEventData is "event_data" of the Default format and "data" of the
// CloudEvents format.
type harborEventData struct {
	Resources []struct {
		Digest      string `json:"digest"`
		Tag         string `json:"tag"`
		ResourceURL string `json:"resource_url"`
	} `json:"resources"`
	Repository struct {
		Name         string `json:"name"`
		Namespace    string `json:"namespace"`
		RepoFullName string `json:"repo_full_name"`
	} `json:"repository"`
}

// harborPush is what one push says besides its resources.
type harborPush struct {
	// key gives the key of the event of one tag.
	key        func(tag string) string
	pusher     string
	deliveryID string
	at         time.Time
}

// Authenticate implements [Sender].
func (s HarborSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, cmp.Or(s.Header, "Authorization"), s.Secret)
}

// Parse implements [Sender].
func (HarborSender) Parse(d *Delivery) (Result, error) {
	mt, err := mediaType(d)
	if err != nil {
		return Result{}, err
	}
	switch {
	case mt == mediaCloudEvent || mt == mediaCloudEventBatch || d.Header.Get("Ce-Specversion") != "":
		return parseHarborCloudEvents(d)
	case mt == "application/json" || mt == "":
		return parseHarborDefault(d)
	default:
		return Result{}, fault.Permanent(fmt.Errorf("%w %q: want application/json (Default payload format) or %s (CloudEvents)",
			ErrUnsupportedMediaType, mt, mediaCloudEvent))
	}
}

// parseHarborDefault reads the Default payload format. It carries no
// delivery id: the key of each tag is the hash of the body and the tag.
func parseHarborDefault(d *Delivery) (Result, error) {
	var p harborPayload
	if err := json.Unmarshal(d.Body, &p); err != nil {
		return Result{}, malformed("decoding Harbor payload: %w", err)
	}
	if p.Type == "" {
		return Result{}, malformed("Harbor payload has no type")
	}
	if p.Type != harborPushDefault {
		return Result{Ignored: p.Type}, nil
	}
	if p.EventData == nil {
		return Result{}, malformed("Harbor push has no event_data")
	}
	body := bodyKey(d)
	evs, ignored, err := harborEvents(d, *p.EventData, harborPush{
		key:    func(tag string) string { return body + "/" + tag },
		pusher: p.Operator,
		at:     harborOccurAt(p.OccurAt),
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Events: evs, Ignored: ignored}, nil
}

// parseHarborCloudEvents reads the CloudEvents payload format: the key of a
// tag is the CloudEvent id, plus the tag when the push has several resources.
func parseHarborCloudEvents(d *Delivery) (Result, error) {
	ces, err := cloudEventsOf(d)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var skipped skipReasons
	ids := make([]string, 0, len(ces))
	for i := range ces {
		ce := &ces[i]
		ids = append(ids, ce.ID())
		if ce.Type() != harborPushCloudEvent {
			skipped.add(ce.Type())
			continue
		}
		evs, ignored, err := harborCloudEventPush(d, ce)
		if err != nil {
			return Result{}, fmt.Errorf("harbor CloudEvent %s: %w", ce.ID(), err)
		}
		if ignored != "" {
			skipped.add(ignored)
		}
		res.Events = append(res.Events, evs...)
	}
	res.DeliveryID = strings.Join(ids, ",")
	if len(res.Events) == 0 {
		if len(ces) == 1 {
			res.Ignored = skipped.order[0]
		} else {
			res.Ignored = skipped.String(len(ces))
		}
	}
	return res, nil
}

// harborCloudEventPush turns one harbor.artifact.pushed CloudEvent into
// events.
func harborCloudEventPush(d *Delivery, ce *cloudevents.Event) ([]cloudevents.Event, string, error) {
	if len(ce.Data()) == 0 {
		return nil, "", malformed("push has no data")
	}
	var ed harborEventData
	if err := json.Unmarshal(ce.Data(), &ed); err != nil {
		return nil, "", malformed("decoding data: %w", err)
	}
	// Only a string is a meaningful operator; anything else is left out.
	operator, _ := types.ToString(ce.Extensions()[harborExtOperator])
	id := ce.ID()
	several := len(ed.Resources) > 1
	return harborEvents(d, ed, harborPush{
		key: func(tag string) string {
			if several {
				return id + "/" + tag
			}
			return id
		},
		pusher:     operator,
		deliveryID: id,
		at:         ce.Time(),
	})
}

// harborEvents builds one event per tagged resource of a push, in the order
// of the payload. When no resource is tagged it returns why instead.
func harborEvents(d *Delivery, ed harborEventData, push harborPush) ([]cloudevents.Event, string, error) {
	if len(ed.Resources) == 0 {
		return nil, "push with no resources", nil
	}
	var evs []cloudevents.Event
	for i, r := range ed.Resources {
		// Harbor reports a push by digest with the digest as its tag.
		if r.Tag == "" || r.Tag == r.Digest || strings.HasPrefix(r.Tag, "sha256:") {
			continue
		}
		host, urlRepo := harborSplitResourceURL(r.ResourceURL)
		if host == "" {
			return nil, "", malformed("Harbor resource %d has no registry host in resource_url %q", i, r.ResourceURL)
		}
		p := events.ImagePushed{
			Registry:   host,
			Repository: cmp.Or(ed.Repository.RepoFullName, urlRepo),
			Tag:        r.Tag,
			Digest:     r.Digest,
			Pusher:     push.pusher,
			Sender:     SenderHarbor,
			DeliveryID: push.deliveryID,
		}
		e, err := imagePushedEvent(d, push.key(r.Tag), p, push.at)
		if err != nil {
			return nil, "", fmt.Errorf("harbor resource %d: %w", i, err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return nil, "untagged push", nil
	}
	return evs, "", nil
}

// harborSplitResourceURL splits "<host>/<repo>:<tag>" or
// "<host>/<repo>@<digest>" into host and repository. The host may carry a
// port; a scheme, which Harbor does not send, is dropped.
func harborSplitResourceURL(u string) (host, repo string) {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	host, rest, _ := strings.Cut(u, "/")
	if r, _, ok := strings.Cut(rest, "@"); ok {
		return host, r
	}
	// A repository path has no ':'; the last one starts the tag.
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest = rest[:i]
	}
	return host, rest
}

// harborOccurAt reads occur_at: unix seconds as an integer, a float or a
// string. It is informative only: zero when absent or unreadable.
func harborOccurAt(raw json.RawMessage) time.Time {
	s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	f, err := strconv.ParseFloat(s, 64)
	// Up to year 5138: beyond, the value is not unix seconds.
	if err != nil || f <= 0 || f > 1e11 {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// harborIsHeaderName tells whether name is an HTTP header field name (an
// RFC 9110 token).
func harborIsHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
