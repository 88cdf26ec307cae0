package plan

import (
	"cmp"
	"context"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// saw records in the application's state the push verify verified (e,
// its verdict v) with change, the state's part of plan's decision (nil:
// none), in one update: no write of its own on the way from a push to its
// rollout. It returns the application.webhook.missed the push reveals (a
// poll's push of a version no webhook announced), derived from e, so a
// redelivery journals it once. Pushes verify refused or skipped are
// recorded by verify.
func (f *Function) saw(ctx context.Context, e cloudevents.Event, v events.ImageVerified, app string, change func(*rollout.AppState)) ([]cloudevents.Event, error) {
	seen := seenOf(e, v)
	var silence *rollout.Silence
	if err := f.repo.UpdateApp(ctx, app, func(st *rollout.AppState) error {
		st.Saw(seen)
		if change != nil {
			change(st)
		}
		silence = nil
		if s := st.WebhookSilent; s != nil && s.EventID == seen.EventID {
			silence = s
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if silence == nil {
		return nil, nil
	}
	m := events.WebhookMissed{Application: app, Repository: v.Image, Version: silence.Tag, Digest: silence.Digest,
		Found: silence.Found, PushID: seen.EventID}
	if w := silence.LastWebhook; w != nil {
		m.LastWebhook, m.LastWebhookVersion = w.At, w.Tag
	}
	ev, err := events.Derive(e, events.TypeApplicationWebhookMissed, app, m)
	return []cloudevents.Event{ev}, err
}

// seenOf is the push verify verified with e, as the application's state
// keeps it: its id is the push's (verify derives e's from it).
func seenOf(e cloudevents.Event, v events.ImageVerified) rollout.Seen {
	return rollout.Seen{Tag: v.Tag, Digest: v.Digest, Source: cmp.Or(v.Source, rollout.SourceWebhook), At: e.Time().UTC(),
		EventID: strings.TrimSuffix(e.ID(), "/"+e.Type())}
}
