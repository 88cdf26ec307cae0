package intake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// SenderCloudEvents is the sender type of native CloudEvents posted by
// anyone (a CI job, an event broker, another flotilla); it also serves
// POST /events.
const SenderCloudEvents = "cloudevents"

// CloudEventsSender reads CloudEvents in binary, structured or batch mode.
// Each event of a type the intake consumes becomes a journal event:
//   - dev.flotilla.image.pushed.v1 and dev.flotilla.git.pushed.v1, whose data
//     is the catalogue payload ([ImagePushed], [GitPushed]);
//   - CDEvents dev.cdevents.artifact.published (0.1.x, 0.2.x, 0.3.x) of a
//     container image: subject.id is a package URL such as
//     pkg:oci/api@sha256%3A0b31...?repository_url=registry.example.com/shop&tag=1.4.2,
//     which becomes a [TypeImagePushed]; one without a tag is ignored.
//
// Other types are skipped. The incoming event's time, subject and rollout id
// extension are kept. Event ids derive from the incoming source and id, the
// pair CloudEvents makes unique, so a redelivered event is recognized.
//
// Authentication: a static header, by default "Authorization: Bearer
// <secret>" (see [checkHeaderToken] for the forms accepted;
// ReceiverConfig.Header picks another header).
type CloudEventsSender struct {
	// Secret is the receiver's secret.
	Secret string
	// Header carries the secret. Default "Authorization".
	Header string
}

func newCloudEventsSender(rc ReceiverConfig) (Sender, error) {
	if rc.Header != "" && !cloudEventsHeaderName.MatchString(rc.Header) {
		return nil, fmt.Errorf("header %q is not a valid HTTP header name", rc.Header)
	}
	return CloudEventsSender{Secret: rc.Secret, Header: rc.Header}, nil
}

// cloudEventsHeaderName matches an HTTP field name (RFC 9110 token).
var cloudEventsHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// cdeventsArtifactPublished matches the CDEvents artifact published types
// flotilla reads: the subject id is a purl in all of them.
var cdeventsArtifactPublished = regexp.MustCompile(`^dev\.cdevents\.artifact\.published\.0\.[123]\.[0-9]+$`)

// cdeventsArtifact is the part of a CDEvents artifact event flotilla reads.
type cdeventsArtifact struct {
	Context struct {
		Timestamp string `json:"timestamp"`
	} `json:"context"`
	Subject struct {
		ID string `json:"id"`
		// Content is read leniently: only its "user" is used.
		Content json.RawMessage `json:"content"`
	} `json:"subject"`
}

// Authenticate implements [Sender].
func (s CloudEventsSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, cmp.Or(s.Header, "Authorization"), s.Secret)
}

// Parse implements [Sender].
func (CloudEventsSender) Parse(d *Delivery) (Result, error) {
	ces, err := cloudEventsOf(d)
	if err != nil {
		return Result{}, err
	}
	res := Result{DeliveryID: ces[0].ID()}
	var skipped []string
	for i, ce := range ces {
		e, skip, err := cloudEventsEvent(d, ce)
		if err != nil {
			if len(ces) > 1 {
				err = fault.Permanent(fmt.Errorf("event %d of the batch: %w", i, err))
			}
			return Result{}, err
		}
		if skip != "" {
			if !slices.Contains(skipped, skip) {
				skipped = append(skipped, skip)
			}
			continue
		}
		res.Events = append(res.Events, e)
	}
	if len(res.Events) == 0 {
		res.Ignored = strings.Join(skipped, "; ")
	}
	return res, nil
}

// cloudEventsEvent turns one incoming event into a journal event, or says
// why it is skipped.
func cloudEventsEvent(d *Delivery, ce cloudevents.Event) (cloudevents.Event, string, error) {
	key := cloudEventsKey(ce)
	var e cloudevents.Event
	var err error
	switch typ := ce.Type(); {
	case typ == events.TypeImagePushed:
		e, err = cloudEventsImagePushed(d, key, ce)
	case typ == events.TypeGitPushed:
		e, err = cloudEventsGitPushed(d, key, ce)
	case cdeventsArtifactPublished.MatchString(typ):
		var skip string
		if e, skip, err = cdeventsArtifactEvent(d, key, ce); skip != "" {
			return cloudevents.Event{}, skip, nil
		}
	default:
		return cloudevents.Event{}, fmt.Sprintf("type %s is not consumed", typ), nil
	}
	if err != nil {
		return cloudevents.Event{}, "", err
	}
	if s := ce.Subject(); s != "" {
		e.SetSubject(s)
	}
	if v, ok := ce.Extensions()[events.ExtRolloutID]; ok {
		if s, err := types.Format(v); err == nil && s != "" {
			e.SetExtension(events.ExtRolloutID, s)
		}
	}
	return e, "", nil
}

// cloudEventsImagePushed re-issues a flotilla image push posted by someone
// else, under this receiver.
func cloudEventsImagePushed(d *Delivery, key string, ce cloudevents.Event) (cloudevents.Event, error) {
	p, err := events.Decode[events.ImagePushed](ce)
	if err != nil {
		return cloudevents.Event{}, err
	}
	p.Sender = SenderCloudEvents
	p.DeliveryID = cmp.Or(p.DeliveryID, ce.ID())
	return imagePushedEvent(d, key, p, ce.Time())
}

// cloudEventsGitPushed re-issues a flotilla git push posted by someone else,
// under this receiver.
func cloudEventsGitPushed(d *Delivery, key string, ce cloudevents.Event) (cloudevents.Event, error) {
	p, err := events.Decode[events.GitPushed](ce)
	if err != nil {
		return cloudevents.Event{}, err
	}
	p.Sender = SenderCloudEvents
	p.DeliveryID = cmp.Or(p.DeliveryID, ce.ID())
	return gitPushedEvent(d, key, p, ce.Time())
}

// cloudEventsKey is the hex SHA-256 of the event's source and id.
func cloudEventsKey(ce cloudevents.Event) string {
	sum := sha256.Sum256([]byte(ce.Source() + "\x00" + ce.ID()))
	return hex.EncodeToString(sum[:])
}

// cdeventsArtifactEvent reads a CDEvents artifact published event.
func cdeventsArtifactEvent(d *Delivery, key string, ce cloudevents.Event) (cloudevents.Event, string, error) {
	var cde cdeventsArtifact
	if err := json.Unmarshal(ce.Data(), &cde); err != nil {
		return cloudevents.Event{}, "", malformed("decoding CDEvent %s: %w", ce.ID(), err)
	}
	if cde.Subject.ID == "" {
		return cloudevents.Event{}, "", malformed("CDEvent %s has no subject.id", ce.ID())
	}
	purl, err := parsePurl(cde.Subject.ID)
	if err != nil {
		return cloudevents.Event{}, "", malformed("CDEvent %s: subject.id: %w", ce.ID(), err)
	}
	img, err := purl.image()
	switch {
	case errors.Is(err, errPurlNotImage):
		return cloudevents.Event{}, fmt.Sprintf("artifact pkg:%s is not a container image", purl.Type), nil
	case err != nil:
		return cloudevents.Event{}, "", malformed("CDEvent %s: subject.id %q: %w", ce.ID(), cde.Subject.ID, err)
	case img.Tag == "":
		return cloudevents.Event{}, "untagged artifact", nil
	}
	var content struct {
		User string `json:"user"`
	}
	_ = json.Unmarshal(cde.Subject.Content, &content) // lenient: only the pusher
	img.Pusher = content.User
	img.Sender = SenderCloudEvents
	img.DeliveryID = ce.ID()
	at := ce.Time()
	if at.IsZero() {
		at, _ = time.Parse(time.RFC3339Nano, cde.Context.Timestamp)
	}
	e, err := imagePushedEvent(d, key, img, at)
	return e, "", err
}

// purl is a package URL (github.com/package-url/purl-spec), decoded.
type purl struct {
	Type       string
	Namespace  string
	Name       string
	Version    string
	Qualifiers map[string]string
}

var errPurlNotImage = errors.New("not a container image")

// parsePurl parses "pkg:type/namespace/name@version?qualifiers#subpath" as
// the purl spec says: subpath, qualifiers and version are split off from the
// right, and every component is percent-decoded. The subpath is dropped.
func parsePurl(s string) (purl, error) {
	if len(s) < 4 || !strings.EqualFold(s[:4], "pkg:") {
		return purl{}, errors.New("not a package URL (pkg:...)")
	}
	rest := strings.TrimLeft(s[4:], "/")
	if i := strings.LastIndex(rest, "#"); i >= 0 {
		rest = rest[:i]
	}
	p := purl{Qualifiers: map[string]string{}}
	if i := strings.LastIndex(rest, "?"); i >= 0 {
		for _, kv := range strings.Split(rest[i+1:], "&") {
			k, v, _ := strings.Cut(kv, "=")
			v, err := url.PathUnescape(v)
			if err != nil {
				return purl{}, fmt.Errorf("qualifier %q: %w", k, err)
			}
			if k != "" && v != "" {
				p.Qualifiers[strings.ToLower(k)] = v
			}
		}
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		v, err := url.PathUnescape(rest[i+1:])
		if err != nil {
			return purl{}, fmt.Errorf("version: %w", err)
		}
		p.Version, rest = v, rest[:i]
	}
	typ, path, _ := strings.Cut(rest, "/")
	p.Type = strings.ToLower(typ)
	var segs []string
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" {
			continue
		}
		seg, err := url.PathUnescape(seg)
		if err != nil {
			return purl{}, fmt.Errorf("name: %w", err)
		}
		segs = append(segs, seg)
	}
	if p.Type == "" || len(segs) == 0 {
		return purl{}, errors.New("package URL has no type or name")
	}
	p.Name = segs[len(segs)-1]
	p.Namespace = strings.Join(segs[:len(segs)-1], "/")
	return p, nil
}

// image reads the image of an oci or docker purl: registry and repository
// from the repository_url qualifier and the name, the tag from the tag
// qualifier, the digest from the version. repository_url names the
// repository per the purl spec (registry.example.com/shop/api for
// pkg:oci/api), but is often only its parent (registry.example.com/shop):
// the name is appended unless repository_url already ends with it.
func (p purl) image() (events.ImagePushed, error) {
	name := p.Name
	if p.Namespace != "" {
		name = p.Namespace + "/" + p.Name
	}
	var img events.ImagePushed
	switch p.Type {
	case "oci":
	case "docker":
		img.Registry = "docker.io"
	default:
		return img, errPurlNotImage
	}
	if u := p.Qualifiers["repository_url"]; u != "" {
		host, path := purlRepositoryURL(u)
		if host == "" {
			return img, fmt.Errorf("repository_url %q names no registry", u)
		}
		img.Registry = host
		switch {
		case path == "":
		case path == name || strings.HasSuffix(path, "/"+name):
			name = path
		default:
			name = path + "/" + name
		}
	}
	if img.Registry == "" {
		return img, errors.New("pkg:oci without repository_url names no registry")
	}
	if img.Registry == "docker.io" && !strings.Contains(name, "/") {
		name = "library/" + name
	}
	img.Repository = name
	img.Tag = p.Qualifiers["tag"]
	if strings.Contains(p.Version, ":") {
		img.Digest = p.Version
	} else if p.Type == "docker" && img.Tag == "" {
		img.Tag = p.Version // pkg:docker versions are tags or digests
	}
	return img, nil
}

// purlRepositoryURL splits "[scheme://]host[/path][:tag][@digest]" into its
// host and its path without the tag or digest some producers leave on it.
func purlRepositoryURL(u string) (host, path string) {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	host, path, _ = strings.Cut(u, "/")
	path, _, _ = strings.Cut(path, "@")
	if i := strings.LastIndex(path, ":"); i > strings.LastIndex(path, "/") {
		path = path[:i]
	}
	return host, strings.Trim(path, "/")
}
