package intake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderBitbucket is the sender type of Bitbucket Cloud webhooks.
const SenderBitbucket = "bitbucket"

// BitbucketSender reads Bitbucket Cloud "repo:push" webhooks. Every pushed
// branch or tag of push.changes becomes a [TypeGitPushed], in payload order;
// deleted refs, and every other event, are ignored. Bitbucket sends no
// changed paths, nor a clone URL: RepoURL is
// "https://bitbucket.org/<full_name>.git".
//
// Authentication: X-Hub-Signature is "sha256=" and the hex HMAC-SHA256 of the
// raw body keyed with the secret (note: not X-Hub-Signature-256).
//
// Delivery id: X-Request-UUID; the key of each event adds "/" and the ref.
// Without X-Request-UUID the key is the hash of the body: X-Hook-UUID names
// the webhook, not the delivery, and is the same for every push.
type BitbucketSender struct {
	// Secret is the receiver's secret.
	Secret string
}

// newBitbucketSender builds the sender of a "bitbucket" receiver.
func newBitbucketSender(rc ReceiverConfig) (Sender, error) {
	return BitbucketSender{Secret: rc.Secret}, nil
}

// bitbucketSignaturePrefix prefixes the X-Hub-Signature of Bitbucket Cloud and
// Bitbucket Server alike.
const bitbucketSignaturePrefix = "sha256="

type bitbucketRef struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Target struct {
		Hash string `json:"hash"`
	} `json:"target"`
}

type bitbucketPush struct {
	Actor struct {
		Nickname    string `json:"nickname"`
		DisplayName string `json:"display_name"`
	} `json:"actor"`
	Repository struct {
		FullName string `json:"full_name"`
		Links    struct {
			HTML struct {
				Href string `json:"href"`
			} `json:"html"`
		} `json:"links"`
	} `json:"repository"`
	Push struct {
		Changes []struct {
			Old *bitbucketRef `json:"old"`
			New *bitbucketRef `json:"new"`
		} `json:"changes"`
	} `json:"push"`
}

// Authenticate implements [Sender].
func (s BitbucketSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHMAC(d, sha256.New, s.Secret, "X-Hub-Signature", d.Header.Get("X-Hub-Signature"), bitbucketSignaturePrefix)
}

// Parse implements [Sender].
func (BitbucketSender) Parse(d *Delivery) (Result, error) {
	return bitbucketFamily{name: "Bitbucket", deliveryHeader: "X-Request-UUID", pushEvent: "repo:push", push: bitbucketCloudPush}.parse(d)
}

// bitbucketCloudPush decodes a Bitbucket Cloud repo:push and builds its
// events.
func bitbucketCloudPush(d *Delivery, base events.GitPushed, key string) ([]cloudevents.Event, []string, error) {
	var push bitbucketPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return nil, nil, malformed("decoding Bitbucket push: %w", err)
	}
	base.RepoURL = bitbucketRepoURL(push)
	base.Pusher = cmp.Or(push.Actor.Nickname, push.Actor.DisplayName)
	base.Sender = SenderBitbucket
	if base.RepoURL == "" {
		return nil, nil, malformed("Bitbucket push has no repository.full_name")
	}
	return bitbucketEvents(d, push, base, key)
}

// bitbucketFamily is what tells Bitbucket Cloud and Bitbucket Server
// deliveries apart; the rest of their handling is the same.
type bitbucketFamily struct {
	name           string // for messages
	deliveryHeader string
	pushEvent      string // X-Event-Key of a push
	// push decodes a push and builds its events from base (Receiver and
	// DeliveryID set) with key; it says why it skipped changes.
	push func(d *Delivery, base events.GitPushed, key string) ([]cloudevents.Event, []string, error)
}

func (f bitbucketFamily) parse(d *Delivery) (Result, error) {
	event := d.Header.Get("X-Event-Key")
	if event == "" {
		return Result{}, malformed("missing X-Event-Key header")
	}
	delivery := strings.TrimSpace(d.Header.Get(f.deliveryHeader))
	res := Result{DeliveryID: delivery}
	if event != f.pushEvent {
		res.Ignored = bitbucketIgnoredEvent(event)
		return res, nil
	}
	if err := gitJSONMediaType(d, f.name); err != nil {
		return Result{}, err
	}
	key := delivery
	if key == "" {
		key = bodyKey(d)
	}
	evs, skipped, err := f.push(d, events.GitPushed{Receiver: d.Receiver, DeliveryID: delivery}, key)
	if err != nil {
		return Result{}, err
	}
	res.Events = evs
	if len(evs) == 0 {
		res.Ignored = gitIgnoredChanges(skipped)
	}
	return res, nil
}

// bitbucketEvents builds the event of every pushed ref of push, in payload
// order, from base; it says why it skipped the other changes.
func bitbucketEvents(d *Delivery, push bitbucketPush, base events.GitPushed, key string) ([]cloudevents.Event, []string, error) {
	var (
		evs     []cloudevents.Event
		skipped []string
	)
	for i, c := range push.Push.Changes {
		if c.New == nil {
			skipped = append(skipped, bitbucketDeleted(c.Old))
			continue
		}
		if c.New.Name == "" {
			return nil, nil, malformed("Bitbucket push change %d names no ref", i)
		}
		ref, kind := bitbucketRefName(c.New)
		if ref == "" {
			skipped = append(skipped, fmt.Sprintf("ref type %q", kind))
			continue
		}
		p := base
		p.Ref, p.After = ref, c.New.Target.Hash
		if c.Old != nil {
			p.Before = c.Old.Target.Hash
		}
		gitSetRefNames(&p)
		e, err := gitPushedEvent(d, key+"/"+ref, p, time.Time{})
		if err != nil {
			return nil, nil, err
		}
		evs = append(evs, e)
	}
	return evs, skipped, nil
}

// bitbucketIgnoredEvent says why an event other than a push is ignored.
func bitbucketIgnoredEvent(event string) string {
	if event == "diagnostics:ping" {
		return "ping"
	}
	return fmt.Sprintf("event %q", event)
}

// bitbucketRepoURL is the HTTPS clone URL of the pushed repository, or "".
func bitbucketRepoURL(push bitbucketPush) string {
	if n := strings.Trim(push.Repository.FullName, "/"); n != "" {
		return "https://bitbucket.org/" + n + ".git"
	}
	if h := strings.TrimSuffix(push.Repository.Links.HTML.Href, "/"); h != "" {
		return h + ".git"
	}
	return ""
}

// bitbucketRefName returns the full name of r ("" when its type is not a
// branch or a tag) and its kind.
func bitbucketRefName(r *bitbucketRef) (ref, kind string) {
	switch r.Type {
	case "branch", "named_branch":
		return "refs/heads/" + r.Name, "branch"
	case "tag", "annotated_tag":
		return "refs/tags/" + r.Name, "tag"
	default:
		return "", r.Type
	}
}

// bitbucketDeleted says why the deletion of old is ignored.
func bitbucketDeleted(old *bitbucketRef) string {
	if old == nil {
		return "change with no ref"
	}
	if ref, kind := bitbucketRefName(old); ref != "" {
		return fmt.Sprintf("%s delete %s", kind, ref)
	}
	return fmt.Sprintf("delete of %s %q", old.Type, old.Name)
}

// gitIgnoredChanges says why a push whose ref changes were all skipped is
// ignored, from the reason for each change.
func gitIgnoredChanges(reasons []string) string {
	switch {
	case len(reasons) == 0:
		return "push with no ref changes"
	case len(reasons) == 1:
		return reasons[0]
	case len(reasons) <= 3:
		return strings.Join(reasons, ", ")
	default:
		return fmt.Sprintf("%s and %d more ref changes", strings.Join(reasons[:3], ", "), len(reasons)-3)
	}
}
