package intake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderBitbucketServer is the sender type of Bitbucket Server and Data
// Center webhooks.
const SenderBitbucketServer = "bitbucket-server"

// BitbucketServerSender reads Bitbucket Server / Data Center
// "repo:refs_changed" webhooks. Every added or updated branch or tag of
// changes becomes a [TypeGitPushed], in payload order; deleted refs,
// "diagnostics:ping" (the "Test connection" button) and every other event are
// ignored. Bitbucket Server sends no changed paths. The event time is the
// payload's date.
//
// Authentication: X-Hub-Signature is "sha256=" and the hex HMAC-SHA256 of the
// raw body keyed with the secret.
//
// Delivery id: X-Request-Id; the key of each event adds "/" and the ref.
// Without X-Request-Id the key is the hash of the body.
//
// RepoURL is the repository's "http" clone link without user info (Bitbucket
// may put the acting user in it), else its "ssh" clone link.
type BitbucketServerSender struct {
	// Secret is the receiver's secret.
	Secret string
}

// newBitbucketServerSender builds the sender of a "bitbucket-server"
// receiver.
func newBitbucketServerSender(rc ReceiverConfig) (Sender, error) {
	return BitbucketServerSender{Secret: rc.Secret}, nil
}

// bitbucketServerDateLayouts are the layouts of a Bitbucket Server payload's
// date ("2017-09-19T09:58:11+1000"), and RFC 3339 in case.
var bitbucketServerDateLayouts = []string{"2006-01-02T15:04:05-0700", "2006-01-02T15:04:05.000-0700", time.RFC3339Nano}

type bitbucketServerPush struct {
	Date  string `json:"date"`
	Actor struct {
		Name string `json:"name"`
		Slug string `json:"slug"`
	} `json:"actor"`
	Repository struct {
		Links struct {
			Clone []struct {
				Href string `json:"href"`
				Name string `json:"name"`
			} `json:"clone"`
		} `json:"links"`
	} `json:"repository"`
	Changes []bitbucketServerChange `json:"changes"`
}

type bitbucketServerChange struct {
	Ref struct {
		ID string `json:"id"`
	} `json:"ref"`
	RefID    string `json:"refId"`
	FromHash string `json:"fromHash"`
	ToHash   string `json:"toHash"`
	// Type is ADD, UPDATE or DELETE.
	Type string `json:"type"`
}

// Authenticate implements [Sender].
func (s BitbucketServerSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHMAC(d, sha256.New, s.Secret, "X-Hub-Signature", d.Header.Get("X-Hub-Signature"), bitbucketSignaturePrefix)
}

// Parse implements [Sender].
func (BitbucketServerSender) Parse(d *Delivery) (Result, error) {
	return bitbucketFamily{name: "Bitbucket Server", deliveryHeader: "X-Request-Id", pushEvent: "repo:refs_changed", push: bitbucketServerPushEvents}.parse(d)
}

// bitbucketServerPushEvents decodes a Bitbucket Server repo:refs_changed and
// builds its events.
func bitbucketServerPushEvents(d *Delivery, base events.GitPushed, key string) ([]cloudevents.Event, []string, error) {
	var push bitbucketServerPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return nil, nil, malformed("decoding Bitbucket Server push: %w", err)
	}
	base.RepoURL = bitbucketServerRepoURL(push)
	base.Pusher = cmp.Or(push.Actor.Name, push.Actor.Slug)
	base.Sender = SenderBitbucketServer
	if base.RepoURL == "" {
		return nil, nil, malformed("Bitbucket Server push has no http or ssh clone link")
	}
	return bitbucketServerEvents(d, push, base, key)
}

// bitbucketServerEvents builds the event of every added or updated ref of
// push, in payload order, from base; it says why it skipped the deletes.
func bitbucketServerEvents(d *Delivery, push bitbucketServerPush, base events.GitPushed, key string) ([]cloudevents.Event, []string, error) {
	var (
		evs     []cloudevents.Event
		skipped []string
	)
	at := bitbucketServerTime(push.Date)
	for i, c := range push.Changes {
		p := base
		p.Ref, p.Before, p.After = c.Ref.ID, c.FromHash, c.ToHash
		if p.Ref == "" {
			p.Ref = c.RefID
		}
		if p.Ref == "" {
			return nil, nil, malformed("Bitbucket Server change %d names no ref", i)
		}
		kind := gitSetRefNames(&p)
		if strings.EqualFold(c.Type, "DELETE") || gitNullSHA(c.ToHash) {
			skipped = append(skipped, fmt.Sprintf("%s delete %s", kind, p.Ref))
			continue
		}
		e, err := gitPushedEvent(d, key+"/"+p.Ref, p, at)
		if err != nil {
			return nil, nil, err
		}
		evs = append(evs, e)
	}
	return evs, skipped, nil
}

// bitbucketServerRepoURL is the "http" clone link of the pushed repository
// without user info, else its "ssh" clone link, else "".
func bitbucketServerRepoURL(push bitbucketServerPush) string {
	links := map[string]string{}
	for _, l := range push.Repository.Links.Clone {
		name := strings.ToLower(l.Name)
		if _, seen := links[name]; !seen && l.Href != "" {
			links[name] = l.Href
		}
	}
	if h, ok := links["http"]; ok {
		if u, err := url.Parse(h); err == nil && u.User != nil {
			u.User = nil
			return u.String()
		}
		return h
	}
	return links["ssh"]
}

// bitbucketServerTime reads a payload's date; zero when it does not parse.
func bitbucketServerTime(date string) time.Time {
	for _, layout := range bitbucketServerDateLayouts {
		if t, err := time.Parse(layout, date); err == nil {
			return t
		}
	}
	return time.Time{}
}
