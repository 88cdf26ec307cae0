package verify

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Applications keeps what flotilla knows of each application
// (pkg/state's UpdateApp): verify records there every push it sees.
type Applications interface {
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// WithApplications has verify record the pushes it does not verify for an
// application of cfg (those tracking the image, or following the git
// repository) in the application's state: what it saw
// (rollout.AppState.Saw: version, digest, source, when), why it rejected
// or skipped it, or why it is not verified yet (a registry's error,
// retried). A push verified for an application is recorded by plan, in
// the update of the state it makes with its decision, so the way from a
// push to its rollout has no write more. A poll's push of a version no
// webhook announced reports the application's webhook silent: whichever
// records it emits application.webhook.missed, derived from the push, so
// a redelivery journals it once.
func (f *Function) WithApplications(apps Applications, cfg config.Provider) *Function {
	f.apps = apps
	if f.cfg == nil {
		f.cfg = cfg
	}
	return f
}

// push is what a push event says of the applications it concerns.
type push struct {
	apps       []string
	repository string
	seen       rollout.Seen
	// elsewhere are the applications following the repository the push
	// is none of whose versions (a push to another branch).
	elsewhere map[string]bool
}

// pushOf reads the push e (nil when it concerns no application, or is not
// a version: what cosign attaches to a digest).
func (f *Function) pushOf(e cloudevents.Event) *push {
	p := &push{seen: rollout.Seen{At: e.Time().UTC(), EventID: e.ID(), Source: rollout.SourceWebhook}}
	switch e.Type() {
	case events.TypeImagePushed:
		ip, err := events.Decode[events.ImagePushed](e)
		if err != nil || attachmentTag.MatchString(ip.Tag) {
			return nil
		}
		p.repository, p.seen.Tag, p.seen.Digest = ip.Image(), ip.Tag, ip.Digest
		if ip.Source == events.SourcePoll {
			p.seen.Source = rollout.SourcePoll
		}
		for _, a := range f.cfg.Current().Applications {
			// A release set's image member: its pushes are the set's
			// (docs/design/release-sets.md, "Image members").
			if name := cmp.Or(a.MemberOf, a.Name); a.Git() == nil && config.SameImage(a.Image, p.repository) && !slices.Contains(p.apps, name) {
				p.apps = append(p.apps, name)
			}
		}
	case events.TypeGitPushed:
		gp, err := events.Decode[events.GitPushed](e)
		if err != nil {
			return nil
		}
		p.repository, p.seen.Digest = config.DisplayURL(gp.RepoURL), gp.After
		p.seen.Tag = refName(gp)
		if gp.Tag == "" && gp.Branch != "" && gp.After != "" {
			p.seen.Tag = gp.Branch + "@" + gp.After[:min(12, len(gp.After))]
		}
		if gp.Source == events.SourcePoll {
			p.seen.Source = rollout.SourcePoll
		}
		for _, a := range f.cfg.Current().Applications {
			if g := a.Git(); g != nil && a.MemberOf == "" && config.SameGitRepository(g.URL, gp.RepoURL) {
				p.apps = append(p.apps, a.Name)
				if gp.Branch != "" && gp.Branch != g.Branch {
					if p.elsewhere == nil {
						p.elsewhere = map[string]bool{}
					}
					p.elsewhere[a.Name] = true
				}
			}
		}
	}
	if len(p.apps) == 0 {
		return nil
	}
	return p
}

// record keeps what verify saw of push e and decided (out, or the error
// herr) in the state of each application it concerns, and adds the
// application.webhook.missed of those whose webhook it reveals silent.
func (f *Function) record(ctx context.Context, e cloudevents.Event, out []cloudevents.Event, herr error) ([]cloudevents.Event, error) {
	p := f.pushOf(e)
	if p == nil || herr != nil && fault.IsPermanent(herr) {
		return out, herr
	}
	seen := p.seen
	for _, o := range out {
		if o.Type() == events.TypeImageVerified {
			if v, err := events.Decode[events.ImageVerified](o); err == nil && v.Digest != "" {
				seen.Digest = v.Digest // the digest verify resolved
			}
		}
	}
	for _, app := range p.apps {
		k, skipped := skipOf(app, seen, out)
		if herr == nil && !skipped {
			continue // verified for app: plan records it, with its decision, in the update it makes anyway
		}
		var silence *rollout.Silence
		if p.elsewhere[app] {
			if seen.Source == rollout.SourcePoll {
				continue
			}
			if err := f.apps.UpdateApp(ctx, app, func(st *rollout.AppState) error { st.Heard(seen); return nil }); err != nil {
				return nil, fmt.Errorf("recording the push of %s of %s: %w", seen.Tag, app, err)
			}
			continue
		}
		err := f.apps.UpdateApp(ctx, app, func(st *rollout.AppState) error {
			st.Saw(seen)
			if herr != nil {
				st.Failed(seen.EventID, herr.Error())
			}
			if skipped {
				st.Skip(k)
			}
			silence = nil
			if s := st.WebhookSilent; s != nil && s.EventID == seen.EventID {
				silence = s
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("recording the push of %s of %s: %w", seen.Tag, app, err)
		}
		if silence == nil || herr != nil {
			continue
		}
		m := events.WebhookMissed{Application: app, Repository: p.repository, Version: silence.Tag, Digest: silence.Digest,
			Found: silence.Found, PushID: seen.EventID}
		if w := silence.LastWebhook; w != nil {
			m.LastWebhook, m.LastWebhookVersion = w.At, w.Tag
		}
		ev, err := events.Derive(e, events.TypeApplicationWebhookMissed, app, m)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, herr
}

// skipOf is what of verify's verdict out says app does not roll seen out,
// and why.
func skipOf(app string, seen rollout.Seen, out []cloudevents.Event) (rollout.Skipped, bool) {
	k := rollout.Skipped{Tag: seen.Tag, Digest: seen.Digest, Source: seen.Source, At: seen.At, EventID: seen.EventID}
	for _, o := range out {
		switch o.Type() {
		case events.TypeImageRejected:
			r, err := events.Decode[events.ImageRejected](o)
			if err != nil {
				continue
			}
			k.Outcome, k.Reason = rollout.OutcomeRejected, r.Reason
			return k, true
		case events.TypeGitRejected:
			r, err := events.Decode[events.GitRejected](o)
			if err != nil {
				continue
			}
			k.Outcome, k.Reason = rollout.OutcomeRejected, r.Reason
			return k, true
		case events.TypeRolloutSkipped:
			s, err := events.Decode[events.RolloutSkipped](o)
			if err != nil || s.Application != app {
				continue
			}
			k.Outcome, k.Reason = rollout.OutcomeSkipped, s.Reason
			return k, true
		}
	}
	return k, false
}
