package intake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// imagePushedEvent builds the [TypeImagePushed] of one pushed tag. key tells
// this push apart from every other the receiver gets (the sender's delivery
// id, plus the tag when one delivery carries several); the event id is
// "<receiver>/<sender>/<key>", so a redelivery is recognized. at is when the
// sender says the push happened, zero when it does not.
func imagePushedEvent(d *Delivery, key string, p events.ImagePushed, at time.Time) (cloudevents.Event, error) {
	p.Receiver = d.Receiver
	if p.Registry == "" || p.Repository == "" || p.Tag == "" {
		return cloudevents.Event{}, malformed("%s push names no registry, repository or tag", p.Sender)
	}
	e, err := events.New(d.Receiver+"/"+p.Sender+"/"+key, hookSource(d.Receiver), events.TypeImagePushed, p)
	if err != nil {
		return e, err
	}
	e.SetSubject(p.Image() + ":" + p.Tag)
	e.SetTime(eventTime(at, d))
	return e, nil
}

// gitPushedEvent builds the [TypeGitPushed] of one pushed ref; key as for
// [imagePushedEvent].
func gitPushedEvent(d *Delivery, key string, p events.GitPushed, at time.Time) (cloudevents.Event, error) {
	p.Receiver = d.Receiver
	if p.RepoURL == "" || p.Ref == "" {
		return cloudevents.Event{}, malformed("%s push names no repository URL or ref", p.Sender)
	}
	e, err := events.New(d.Receiver+"/"+p.Sender+"/"+key, hookSource(d.Receiver), events.TypeGitPushed, p)
	if err != nil {
		return e, err
	}
	e.SetSubject(p.RepoURL + "#" + p.Ref)
	e.SetTime(eventTime(at, d))
	return e, nil
}

// gitPullRequestEvent builds the git.pullrequest event of a delivery: only
// for flotilla's own branches (flotilla/<rollout>/<wave>), whose rollout it
// names. Others are ignored, saying why.
func gitPullRequestEvent(d *Delivery, res Result, key string, p events.GitPullRequest) (Result, error) {
	p.Receiver = d.Receiver
	if p.RepoURL == "" || p.Number <= 0 || p.HeadRef == "" {
		return Result{}, malformed("%s pull request names no repository URL, number or head branch", p.Sender)
	}
	rest, ok := strings.CutPrefix(p.HeadRef, "flotilla/")
	id, _, _ := strings.Cut(rest, "/")
	if !ok || id == "" {
		res.Ignored = fmt.Sprintf("pull request #%d of branch %s: not flotilla's", p.Number, p.HeadRef)
		return res, nil
	}
	switch p.Action {
	case "opened", "closed", "reopened", "merged", "merge", "close", "reopen", "open":
	default:
		res.Ignored = fmt.Sprintf("pull request #%d action %q", p.Number, p.Action)
		return res, nil
	}
	e, err := events.New(d.Receiver+"/"+p.Sender+"/"+key, hookSource(d.Receiver), events.TypeGitPullRequest, p)
	if err != nil {
		return Result{}, err
	}
	e.SetSubject(fmt.Sprintf("%s#%d", p.RepoURL, p.Number))
	e.SetExtension(events.ExtRolloutID, id)
	e.SetTime(eventTime(time.Time{}, d))
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// bodyKey is a delivery key for senders that send no delivery id: the hash
// of the body, so the same body redelivered is the same push.
func bodyKey(d *Delivery) string {
	sum := sha256.Sum256(bytes.TrimSpace(d.Body))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// Media types of the CloudEvents HTTP binding's structured and batch modes.
const (
	mediaCloudEvent      = "application/cloudevents+json"
	mediaCloudEventBatch = "application/cloudevents-batch+json"
)

// cloudEventsOf reads the CloudEvents of a delivery in binary mode (ce-*
// headers), structured mode (application/cloudevents+json) or batch mode
// (application/cloudevents-batch+json). Every event must be valid.
func cloudEventsOf(d *Delivery) ([]cloudevents.Event, error) {
	mt, err := mediaType(d)
	if err != nil {
		return nil, err
	}
	var evs []cloudevents.Event
	if mt == mediaCloudEventBatch {
		if err := json.Unmarshal(d.Body, &evs); err != nil {
			return nil, malformed("decoding CloudEvents batch: %w", err)
		}
		if len(evs) == 0 {
			return nil, malformed("empty CloudEvents batch")
		}
	} else {
		for name := range d.Header {
			// sdk-go v2.16.2 panics on a "Ce-" header naming no attribute
			// (fixed upstream in cloudevents/sdk-go#1307, not released).
			if strings.EqualFold(name, "ce-") {
				return nil, malformed("header %q names no CloudEvents attribute", name)
			}
		}
		msg := cehttp.NewMessage(d.Header, io.NopCloser(bytes.NewReader(d.Body)))
		if msg.ReadEncoding() == binding.EncodingUnknown {
			return nil, fault.Permanent(fmt.Errorf("%w %q: not a CloudEvent: want ce-* headers (binary mode), %s or %s",
				ErrUnsupportedMediaType, mt, mediaCloudEvent, mediaCloudEventBatch))
		}
		e, err := binding.ToEvent(context.Background(), msg)
		if err != nil {
			return nil, malformed("decoding CloudEvent: %w", err)
		}
		evs = []cloudevents.Event{*e}
	}
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			return nil, malformed("CloudEvent %d is not valid: %w", i, err)
		}
	}
	return evs, nil
}

// jsonOrFormPayload returns the JSON of a delivery from a GitHub-like git
// host (sender names it, for messages): the body, or the "payload" field of
// a form-encoded body.
func jsonOrFormPayload(d *Delivery, sender string) ([]byte, error) {
	mt, err := mediaType(d)
	if err != nil {
		return nil, err
	}
	switch mt {
	case "application/json", "":
		return d.Body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(d.Body))
		if err != nil {
			return nil, malformed("decoding form-encoded %s delivery: %w", sender, err)
		}
		if !form.Has("payload") {
			return nil, malformed("form-encoded %s delivery has no payload field", sender)
		}
		return []byte(form.Get("payload")), nil
	default:
		return nil, fault.Permanent(fmt.Errorf("%w %q: want application/json or application/x-www-form-urlencoded", ErrUnsupportedMediaType, mt))
	}
}
