package intake

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// SenderDockerHub is the sender type of Docker Hub repository webhooks.
const SenderDockerHub = "dockerhub"

// dockerHubRegistry is the registry host of every Docker Hub push.
const dockerHubRegistry = "docker.io"

// DockerHubSender reads Docker Hub repository webhooks: each push of a tag
// becomes a [TypeImagePushed]. Docker Hub reports no digest: resolve the tag
// at the registry before acting on it.
//
// Authentication: Docker Hub cannot sign nor send a header, so the receiver's
// secret is the last path segment of the webhook URL,
// /hooks/<receiver>/<token>.
type DockerHubSender struct {
	// Secret is the receiver's secret, the path token.
	Secret string
}

func newDockerHubSender(rc ReceiverConfig) (Sender, error) {
	return DockerHubSender{Secret: rc.Secret}, nil
}

type dockerHubPush struct {
	PushData struct {
		Tag      string            `json:"tag"`
		Pusher   string            `json:"pusher"`
		PushedAt dockerHubUnixTime `json:"pushed_at"`
	} `json:"push_data"`
	Repository struct {
		RepoName  string `json:"repo_name"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"repository"`
}

func (DockerHubSender) usesPathToken() bool { return true }

// Authenticate implements [Sender].
func (s DockerHubSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkPathToken(d, s.Secret)
}

// Parse implements [Sender].
func (DockerHubSender) Parse(d *Delivery) (Result, error) {
	if err := checkJSONHookMediaType(d); err != nil {
		return Result{}, err
	}
	var push dockerHubPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return Result{}, malformed("decoding Docker Hub push: %w", err)
	}
	if push.PushData.Tag == "" {
		return Result{}, malformed("Docker Hub push has no push_data.tag")
	}
	repo := push.repository()
	if repo == "" {
		return Result{}, malformed("Docker Hub push has no repository.repo_name")
	}
	p := events.ImagePushed{
		Registry:   dockerHubRegistry,
		Repository: repo,
		Tag:        push.PushData.Tag,
		Pusher:     push.PushData.Pusher,
		Sender:     SenderDockerHub,
	}
	e, err := imagePushedEvent(d, bodyKey(d), p, push.PushData.PushedAt.t)
	if err != nil {
		return Result{}, err
	}
	return Result{Events: []cloudevents.Event{e}}, nil
}

// repository is the repository path of the push: an official image ("nginx")
// lives under "library/".
func (p *dockerHubPush) repository() string {
	repo := p.Repository.RepoName
	if repo == "" && p.Repository.Name != "" {
		repo = p.Repository.Name
		if p.Repository.Namespace != "" {
			repo = p.Repository.Namespace + "/" + repo
		}
	}
	if repo != "" && !strings.Contains(repo, "/") {
		repo = "library/" + repo
	}
	return repo
}

// maxUnixSeconds is 10000-01-01T00:00:00Z: later times are not timestamps.
const maxUnixSeconds = 253402300800

// dockerHubUnixTime reads unix seconds written as an integer, a float (old
// senders write 1.417566161e+09) or a string of either. Anything else leaves
// it zero: the time is informative only, not worth refusing a push for.
type dockerHubUnixTime struct{ t time.Time }

// UnmarshalJSON implements [json.Unmarshaler]; it never fails.
func (u *dockerHubUnixTime) UnmarshalJSON(b []byte) error {
	u.t = time.Time{}
	f, err := strconv.ParseFloat(strings.Trim(string(b), `"`), 64)
	if err != nil || !(f > 0 && f < maxUnixSeconds) {
		return nil
	}
	sec, frac := math.Modf(f)
	u.t = time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC()
	return nil
}

// checkJSONHookMediaType accepts a JSON body, or one without a Content-Type,
// for senders that only ever post JSON.
func checkJSONHookMediaType(d *Delivery) error {
	mt, err := mediaType(d)
	if err != nil {
		return err
	}
	if mt != "" && mt != "application/json" {
		return fault.Permanent(fmt.Errorf("%w %q: want application/json", ErrUnsupportedMediaType, mt))
	}
	return nil
}
