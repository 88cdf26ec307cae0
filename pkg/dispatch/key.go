package dispatch

import (
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
)

// Key is the partition of an event: events of one key are handled in
// journal order, one at a time; events of different keys in parallel. The
// key is the rollout the event belongs to (the rolloutid extension); else,
// for pushes and their verdicts, the image repository or git repository
// (so two pushes of one application's image are planned one after the
// other; a catch-up's or a drift's revert's request goes with its image's
// pushes, or its git repository's); else the event alone.
func Key(e cloudevents.Event) string {
	if id := events.RolloutID(e); id != "" {
		return RolloutKey(id)
	}
	switch e.Type() {
	case events.TypeReconcileRequested:
		// A git application's names "repository#commit"; an image
		// application's the image pinned.
		if repo, _, git := strings.Cut(e.Subject(), "#"); git && repo != "" {
			return GitKey(repo)
		}
		if repo := imageRepository(e.Subject()); repo != "" {
			return ImageKey(repo)
		}
	case events.TypeImagePushed, events.TypeImageVerified, events.TypeImageRejected:
		if repo := imageRepository(e.Subject()); repo != "" {
			return ImageKey(repo)
		}
	case events.TypeGitPushed, events.TypeGitVerified, events.TypeGitRejected:
		if repo, _, _ := strings.Cut(e.Subject(), "#"); repo != "" {
			return GitKey(repo)
		}
	}
	return "event/" + e.ID()
}

// imageRepository cuts the tag or digest off "registry/repository:tag" (or
// "@digest"); a registry's port comes before the last '/'.
func imageRepository(ref string) string {
	if repo, _, found := strings.Cut(ref, "@"); found {
		return repo
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// ImageKey is the key of the pushes of image repository repo
// ("registry/repository") and their verdicts.
func ImageKey(repo string) string { return "image/" + repo }

// GitKey is the key of the pushes of git repository repo (its URL without
// credentials) and their verdicts.
func GitKey(repo string) string { return "git/" + repo }

// RolloutKey is the key of a rollout's events.
func RolloutKey(id string) string { return "rollout/" + id }
