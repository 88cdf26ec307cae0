package intake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// GitHub Packages (GHCR) deliveries reach the github receiver: a repository
// hook sends X-GitHub-Event "package" with the object under "package", a
// GitHub App sends "registry_package" with it under "registry_package". Both
// are signed like a push (see [GitHubSender]).

// ghcrRegistry is the registry host when the payload names none.
const ghcrRegistry = "ghcr.io"

// ghcrPackageEvent is the envelope of both event kinds; only the field named
// after the event is set.
type ghcrPackageEvent struct {
	Action          string       `json:"action"`
	Package         *ghcrPackage `json:"package"`
	RegistryPackage *ghcrPackage `json:"registry_package"`
	Sender          struct {
		Login string `json:"login"`
	} `json:"sender"`
}

type ghcrPackage struct {
	Name        string `json:"name"`
	Namespace   string `json:"namespace"`
	PackageType string `json:"package_type"`
	Owner       struct {
		Login string `json:"login"`
	} `json:"owner"`
	PackageVersion *struct {
		Version           string `json:"version"`
		PackageURL        string `json:"package_url"`
		UpdatedAt         string `json:"updated_at"`
		ContainerMetadata struct {
			Tag struct {
				Name   string `json:"name"`
				Digest string `json:"digest"`
			} `json:"tag"`
			Manifest struct {
				Digest    string `json:"digest"`
				MediaType string `json:"media_type"`
			} `json:"manifest"`
		} `json:"container_metadata"`
	} `json:"package_version"`
}

// parseGitHubPackage reads a "package" or "registry_package" delivery: a
// container version published or updated with a tag becomes one
// [TypeImagePushed]; untagged manifests (the per-platform manifests of a
// multi-arch push, attestations), other package types and other actions are
// ignored.
func parseGitHubPackage(d *Delivery, event, delivery string) (Result, error) {
	res := Result{DeliveryID: delivery}
	body, err := jsonOrFormPayload(d, "GitHub")
	if err != nil {
		return Result{}, err
	}
	var ev ghcrPackageEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return Result{}, malformed("decoding GitHub %s event: %w", event, err)
	}
	// Lenient: take the object under the other name when it is there.
	pkg := cmp.Or(ev.Package, ev.RegistryPackage)
	if event == "registry_package" {
		pkg = cmp.Or(ev.RegistryPackage, ev.Package)
	}
	if pkg == nil {
		return Result{}, malformed("GitHub %s event has no %s object", event, event)
	}
	switch ev.Action {
	case "published", "updated":
	default:
		res.Ignored = fmt.Sprintf("package action %q", ev.Action)
		return res, nil
	}
	if !strings.EqualFold(pkg.PackageType, "container") {
		res.Ignored = fmt.Sprintf("package type %q", pkg.PackageType)
		return res, nil
	}
	v := pkg.PackageVersion
	if v == nil {
		return Result{}, malformed("GitHub %s event has no package_version", event)
	}
	cm := v.ContainerMetadata
	if cm.Tag.Name == "" {
		res.Ignored = "untagged push"
		return res, nil
	}
	registry, urlRepo := ghcrPackageURL(v.PackageURL)
	p := events.ImagePushed{
		Registry:   registry,
		Repository: ghcrRepository(pkg, urlRepo),
		Tag:        cm.Tag.Name,
		Digest:     cmp.Or(cm.Tag.Digest, cm.Manifest.Digest, v.Version),
		MediaType:  cm.Manifest.MediaType,
		Pusher:     ev.Sender.Login,
		Sender:     SenderGitHub,
		DeliveryID: delivery,
	}
	at, _ := time.Parse(time.RFC3339, v.UpdatedAt)
	e, err := imagePushedEvent(d, delivery, p, at)
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// ghcrPackageURL splits package_version.package_url
// ("ghcr.io/acme/api:1.4.2", sometimes "ghcr.io/acme/api:" with an empty tag)
// into its registry host and repository path. The host is "ghcr.io" when the
// URL names none.
func ghcrPackageURL(raw string) (registry, repository string) {
	raw = strings.TrimSuffix(strings.TrimSpace(raw), ":")
	if i := strings.Index(raw, "://"); i >= 0 {
		raw = raw[i+3:]
	}
	host, path, found := strings.Cut(raw, "/")
	if !found || host == "" || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return ghcrRegistry, ""
	}
	path, _, _ = strings.Cut(path, "@")
	if i := strings.LastIndex(path, ":"); i > strings.LastIndex(path, "/") {
		path = path[:i]
	}
	return host, strings.ToLower(strings.Trim(path, "/"))
}

// ghcrRepository is "<namespace>/<name>" lower-cased, as GHCR names images;
// the package URL's path when the package names no namespace.
func ghcrRepository(pkg *ghcrPackage, fromURL string) string {
	name := pkg.Name
	if n, err := url.PathUnescape(name); err == nil {
		name = n // nested names may arrive as "api%2Fworker"
	}
	ns := cmp.Or(pkg.Namespace, pkg.Owner.Login)
	if ns == "" || name == "" {
		return fromURL
	}
	return strings.ToLower(ns + "/" + name)
}
