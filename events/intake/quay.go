package intake

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderQuay is the sender type of Quay "Push to Repository" (repo_push)
// webhook notifications.
const SenderQuay = "quay"

// quayRegistry is the registry host of a push whose docker_url is missing.
const quayRegistry = "quay.io"

// QuaySender reads Quay repo_push notifications (quay.io and self-hosted
// Quay): each updated tag becomes a [TypeImagePushed], in tag order. Quay
// reports no digest: resolve the tag at the registry before acting on it.
// Notifications of other events (builds, vulnerabilities, mirroring) carry
// no updated_tags and are ignored.
//
// Authentication: a Quay webhook cannot sign nor send a header (only a client
// certificate), so the receiver's secret is the last path segment of the
// webhook URL, /hooks/<receiver>/<token>.
type QuaySender struct {
	// Secret is the receiver's secret, the path token.
	Secret string
}

func newQuaySender(rc ReceiverConfig) (Sender, error) {
	return QuaySender{Secret: rc.Secret}, nil
}

type quayPush struct {
	// Repository is "namespace/name".
	Repository string `json:"repository"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// DockerURL is "<server hostname>/namespace/name".
	DockerURL   string    `json:"docker_url"`
	UpdatedTags *quayTags `json:"updated_tags"`
}

// quayTags reads updated_tags: a list of tags, or (very old Quay) a map of
// tag to image id.
type quayTags []string

// UnmarshalJSON implements [json.Unmarshaler].
func (t *quayTags) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*t = list
		return nil
	}
	var byTag map[string]json.RawMessage
	if err := json.Unmarshal(b, &byTag); err != nil {
		return errors.New("updated_tags is neither a list of tags nor a map of tag to image id")
	}
	*t = slices.Collect(maps.Keys(byTag))
	return nil
}

func (QuaySender) usesPathToken() bool { return true }

// Authenticate implements [Sender].
func (s QuaySender) Authenticate(_ context.Context, d *Delivery) error {
	return checkPathToken(d, s.Secret)
}

// Parse implements [Sender].
func (QuaySender) Parse(d *Delivery) (Result, error) {
	if err := checkJSONHookMediaType(d); err != nil {
		return Result{}, err
	}
	var push quayPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return Result{}, malformed("decoding Quay notification: %w", err)
	}
	if push.UpdatedTags == nil {
		return Result{Ignored: "not a repo_push: no updated_tags"}, nil
	}
	tags := push.tags()
	if len(tags) == 0 {
		return Result{Ignored: "no updated tags"}, nil
	}
	registry, repo := push.image()
	if repo == "" {
		return Result{}, malformed("Quay push names no repository (docker_url, repository)")
	}

	key := bodyKey(d)
	res := Result{Events: make([]cloudevents.Event, 0, len(tags))}
	for _, tag := range tags {
		p := events.ImagePushed{Registry: registry, Repository: repo, Tag: tag, Sender: SenderQuay}
		e, err := imagePushedEvent(d, key+"/"+tag, p, time.Time{})
		if err != nil {
			return Result{}, err
		}
		res.Events = append(res.Events, e)
	}
	return res, nil
}

// tags returns the updated tags sorted, without duplicates or empty ones.
func (p *quayPush) tags() []string {
	tags := slices.DeleteFunc(slices.Clone(*p.UpdatedTags), func(t string) bool { return t == "" })
	slices.Sort(tags)
	return slices.Compact(tags)
}

// image returns the registry host and repository path of the push, from
// docker_url when it has them, else quay.io and the repository field.
func (p *quayPush) image() (registry, repo string) {
	u := strings.TrimPrefix(strings.TrimPrefix(p.DockerURL, "https://"), "http://")
	host, path, _ := strings.Cut(u, "/")
	registry, repo = host, strings.Trim(path, "/")
	if registry == "" {
		registry = quayRegistry
	}
	if repo == "" {
		repo = p.Repository
	}
	if repo == "" && p.Namespace != "" && p.Name != "" {
		repo = p.Namespace + "/" + p.Name
	}
	return registry, repo
}
