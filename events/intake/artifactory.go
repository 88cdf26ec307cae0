package intake

import (
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

// SenderArtifactory is the sender type of JFrog Artifactory webhooks.
const SenderArtifactory = "artifactory"

const (
	// artifactoryAuthHeader carries the secret, or the body's signature.
	artifactoryAuthHeader = "X-JFrog-Event-Auth"
	artifactoryDomain     = "docker"
	artifactoryPushed     = "pushed"
)

// ArtifactorySender reads the predefined webhooks of JFrog Artifactory. A
// "docker" domain "pushed" event (a tag pushed to a Docker repository)
// becomes a [TypeImagePushed]; every other event type and domain is ignored.
//
// Authentication: X-JFrog-Event-Auth is the hex HMAC-SHA256 of the raw body
// keyed with the secret when the webhook has "Use secret for payload
// signature" on, else the secret itself. Either is accepted.
type ArtifactorySender struct {
	// Secret is the receiver's secret: the webhook's secret token.
	Secret string
}

// newArtifactorySender builds the Artifactory sender of rc.
func newArtifactorySender(rc ReceiverConfig) (Sender, error) {
	return ArtifactorySender{Secret: rc.Secret}, nil
}

type artifactoryEvent struct {
	Domain    string `json:"domain"`
	EventType string `json:"event_type"`
	Data      struct {
		RepoKey   string `json:"repo_key"`
		Path      string `json:"path"`
		SHA256    string `json:"sha256"`
		ImageName string `json:"image_name"`
		Tag       string `json:"tag"`
	} `json:"data"`
	// JPDOrigin is the URL of the JFrog Platform Deployment.
	JPDOrigin string `json:"jpd_origin"`
	// Source is "jfrog/<user>".
	Source string `json:"source"`
}

// Authenticate implements [Sender]. Both forms are checked every time, so
// the time taken does not tell which one the receiver expected.
func (s ArtifactorySender) Authenticate(_ context.Context, d *Delivery) error {
	if s.Secret == "" {
		return unauthenticated("no secret configured")
	}
	v := d.Header.Get(artifactoryAuthHeader)
	if v == "" {
		return unauthenticated("missing " + artifactoryAuthHeader + " header")
	}
	token := secureEqual(v, s.Secret)
	signed := checkHMAC(d, sha256.New, s.Secret, artifactoryAuthHeader, v, "") == nil
	if !token && !signed {
		return unauthenticated(artifactoryAuthHeader + " is neither the secret nor the body's HMAC-SHA256")
	}
	return nil
}

// Parse implements [Sender]. Artifactory sends no delivery id: the key is
// the hash of the body, so a redelivery is recognized.
func (ArtifactorySender) Parse(d *Delivery) (Result, error) {
	mt, err := mediaType(d)
	if err != nil {
		return Result{}, err
	}
	if mt != "application/json" && mt != "" {
		return Result{}, fault.Permanent(fmt.Errorf("%w %q: want application/json", ErrUnsupportedMediaType, mt))
	}
	var ev artifactoryEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return Result{}, malformed("decoding Artifactory event: %w", err)
	}
	if ev.Domain == "" || ev.EventType == "" {
		return Result{}, malformed("artifactory event has no domain or event_type")
	}
	if ev.Domain != artifactoryDomain || ev.EventType != artifactoryPushed {
		return Result{Ignored: ev.Domain + " " + ev.EventType}, nil
	}
	p, err := ev.imagePushed()
	if err != nil {
		return Result{}, err
	}
	e, err := imagePushedEvent(d, bodyKey(d), p, time.Time{})
	if err != nil {
		return Result{}, err
	}
	return Result{Events: []cloudevents.Event{e}}, nil
}

// imagePushed reads the pushed image of a docker "pushed" event. The
// registry is the host of jpd_origin: the repository path access method
// names images "<host>/<repo_key>/<image_name>:<tag>".
func (ev *artifactoryEvent) imagePushed() (events.ImagePushed, error) {
	host := artifactoryHost(ev.JPDOrigin)
	if host == "" {
		return events.ImagePushed{}, malformed("artifactory push has no host in jpd_origin %q", ev.JPDOrigin)
	}
	image, tag := ev.Data.ImageName, ev.Data.Tag
	// data.path is "<image_name>/<tag>/<manifest file>": the fallback for
	// either field when it is missing.
	if segs := strings.Split(strings.Trim(ev.Data.Path, "/"), "/"); len(segs) >= 3 {
		if image == "" {
			image = strings.Join(segs[:len(segs)-2], "/")
		}
		if tag == "" {
			tag = segs[len(segs)-2]
		}
	}
	if ev.Data.RepoKey == "" || image == "" {
		return events.ImagePushed{}, malformed("artifactory push names no data.repo_key or data.image_name")
	}
	return events.ImagePushed{
		Registry:   host,
		Repository: ev.Data.RepoKey + "/" + strings.Trim(image, "/"),
		Tag:        tag,
		Digest:     artifactoryDigest(ev.Data.SHA256),
		Pusher:     strings.TrimPrefix(ev.Source, "jfrog/"),
		Sender:     SenderArtifactory,
	}, nil
}

// artifactoryHost is the host[:port] of jpd_origin, with or without a
// scheme; "" when there is none.
func artifactoryHost(origin string) string {
	origin = strings.TrimSpace(origin)
	if origin == "" {
		return ""
	}
	if !strings.Contains(origin, "://") {
		origin = "https://" + origin
	}
	u, err := url.Parse(origin)
	if err != nil {
		return ""
	}
	return u.Host
}

// artifactoryDigest turns data.sha256, the checksum of the manifest file,
// into a digest: bare hex gets the "sha256:" prefix, a digest is kept, and
// anything else (a placeholder, nothing) is left out.
func artifactoryDigest(sum string) string {
	hexSum := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(sum)), "sha256:")
	if len(hexSum) != sha256.Size*2 {
		return ""
	}
	if _, err := hex.DecodeString(hexSum); err != nil {
		return ""
	}
	return "sha256:" + hexSum
}
