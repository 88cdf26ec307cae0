package rollout

import "time"

// What flotilla saw of an application's pushes, kept in its AppState so
// that "I pushed and nothing happened" is answered from the state (the
// API's GET /api/v1/applications, `flotilla get applications`), never
// only from the log.

// Seen is one push of an application's version as flotilla saw it.
type Seen struct {
	// Tag is the version pushed: an image's tag, or a git application's
	// branch@abbrev (or the git tag pushed).
	Tag string `json:"tag"`
	// Digest is the image's digest (as resolved, or as the sender said),
	// or the commit of a git push.
	Digest string `json:"digest,omitempty"`
	// Source is what brought it: SourceWebhook or SourcePoll.
	Source string `json:"source"`
	// At is when it was journaled (the push event's time).
	At time.Time `json:"at"`
	// EventID is the push event's id.
	EventID string `json:"eventId,omitempty"`
	// Error says why the push is not verified yet (the registry's or the
	// repository's answer; verify retries it); "" once it is.
	Error string `json:"error,omitempty"`
}

// Outcomes of a push that started no rollout (Skipped.Outcome).
const (
	// OutcomeSkipped: plan (or verify, for a git push that changes nothing
	// the application tracks) decided not to roll it out: older than the
	// baseline, outside the track, a tag filter, quarantined...
	OutcomeSkipped = "skipped"
	// OutcomeRejected: verify refused it: unsigned, a tag the registry
	// does not resolve, a commit not on the branch...
	OutcomeRejected = "rejected"
)

// Skipped is a push that started no rollout, and why.
type Skipped struct {
	Tag     string    `json:"tag"`
	Digest  string    `json:"digest,omitempty"`
	Source  string    `json:"source,omitempty"`
	Outcome string    `json:"outcome"` // OutcomeSkipped or OutcomeRejected
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
	EventID string    `json:"eventId,omitempty"`
}

// Silence is the alarm of an application's webhook that missed a version:
// a poll found it, and no webhook had announced it. A webhook's push of
// the application ends it.
type Silence struct {
	// Tag and Digest are the version the poll found.
	Tag    string `json:"tag"`
	Digest string `json:"digest,omitempty"`
	// Found is when the poll's push was journaled; EventID is that push.
	Found   time.Time `json:"found"`
	EventID string    `json:"eventId,omitempty"`
	// LastWebhook is the last push a webhook brought before it, nil when
	// no webhook of the application was ever seen.
	LastWebhook *Seen `json:"lastWebhook,omitempty"`
}

// Saw records push p of the application. A webhook's push ends a silence;
// a poll's push of a version no webhook announced starts one, returned
// (nil otherwise, and for a version already reported silent, so a
// redelivered push reports nothing twice).
//
// Pushes may be recorded out of the order they arrived in (verify records
// those it refuses, plan those verified, a journal hop later): one older
// than the last seen does not replace it, and a poll's push older than
// the last webhook raises no alarm (the webhook works since).
func (s *AppState) Saw(p Seen) *Silence {
	if p.Source == "" {
		p.Source = SourceWebhook
	}
	seen, hook := p, p // copies of their own: Failed changes LastSeen only
	if s.LastSeen == nil || !p.At.Before(s.LastSeen.At) {
		s.LastSeen = &seen
	}
	if p.Source != SourcePoll {
		if s.LastWebhook == nil || !p.At.Before(s.LastWebhook.At) {
			s.LastWebhook, s.WebhookSilent = &hook, nil
		}
		return nil
	}
	if sameVersion(s.LastWebhook, p.Tag, p.Digest) || s.LastWebhook != nil && p.At.Before(s.LastWebhook.At) {
		return nil // a webhook brought it first, or came since: the poll only saw it again
	}
	if w := s.WebhookSilent; w != nil && w.Tag == p.Tag && sameDigest(w.Digest, p.Digest) {
		return nil
	}
	silence := &Silence{Tag: p.Tag, Digest: p.Digest, Found: p.At, EventID: p.EventID}
	if s.LastWebhook != nil {
		last := *s.LastWebhook
		silence.LastWebhook = &last
	}
	s.WebhookSilent = silence
	return silence
}

// Heard records webhook push p of the application's repository that is
// none of its versions (a push to a branch it does not follow): the
// receiver works, so it ends a silence and is the last webhook, but it is
// not the last push seen nor skipped (a repository's other branches would
// bury the application's own pushes).
func (s *AppState) Heard(p Seen) {
	if p.Source == SourcePoll {
		return
	}
	if p.Source == "" {
		p.Source = SourceWebhook
	}
	if s.LastWebhook == nil || !p.At.Before(s.LastWebhook.At) {
		s.LastWebhook, s.WebhookSilent = &p, nil
	}
}

// Failed records why push eventID is not verified yet (err "": it is).
func (s *AppState) Failed(eventID, err string) {
	if s.LastSeen != nil && s.LastSeen.EventID == eventID {
		s.LastSeen.Error = err
	}
}

// Skip records a push that started no rollout.
func (s *AppState) Skip(k Skipped) {
	if k.Source == "" {
		k.Source = SourceWebhook
	}
	s.LastSkipped = &k
}

// sameVersion tells whether seen is a push of tag at digest.
func sameVersion(seen *Seen, tag, digest string) bool {
	return seen != nil && seen.Tag == tag && sameDigest(seen.Digest, digest)
}

// sameDigest compares digests where both are known (a sender may not say
// which digest it pushed).
func sameDigest(a, b string) bool { return a == "" || b == "" || a == b }
