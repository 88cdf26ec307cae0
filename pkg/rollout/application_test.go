package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Saw, push after push: a poll's push of a version no webhook announced
// reports the webhook silent once; a webhook's push ends it.
func TestSaw(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	hook := func(tag, digest string, min int) rollout.Seen {
		return rollout.Seen{Tag: tag, Digest: digest, Source: rollout.SourceWebhook, At: t0.Add(time.Duration(min) * time.Minute), EventID: "hook-" + tag}
	}
	poll := func(tag, digest string, min int) rollout.Seen {
		return rollout.Seen{Tag: tag, Digest: digest, Source: rollout.SourcePoll, At: t0.Add(time.Duration(min) * time.Minute), EventID: "poll-" + tag}
	}
	silence := func(p rollout.Seen, last *rollout.Seen) *rollout.Silence {
		return &rollout.Silence{Tag: p.Tag, Digest: p.Digest, Found: p.At, EventID: p.EventID, LastWebhook: last}
	}
	h1 := hook("1.0.0", "sha256:a", 0)
	for _, tc := range []struct {
		name   string
		pushes []rollout.Seen
		// reported is what each push reported (nil: nothing)
		reported []*rollout.Silence
		silent   *rollout.Silence
		last     *rollout.Seen // LastSeen, when not the last push
	}{
		{name: "webhooks only", pushes: []rollout.Seen{h1, hook("1.1.0", "sha256:b", 1)}, reported: []*rollout.Silence{nil, nil}},
		{
			name:     "a poll finds what no webhook announced",
			pushes:   []rollout.Seen{h1, poll("1.1.0", "sha256:b", 5)},
			reported: []*rollout.Silence{nil, silence(poll("1.1.0", "sha256:b", 5), &h1)},
			silent:   silence(poll("1.1.0", "sha256:b", 5), &h1),
		},
		{
			name:     "no webhook ever seen",
			pushes:   []rollout.Seen{poll("1.1.0", "sha256:b", 5)},
			reported: []*rollout.Silence{silence(poll("1.1.0", "sha256:b", 5), nil)},
			silent:   silence(poll("1.1.0", "sha256:b", 5), nil),
		},
		{
			name:     "the same poll's push again reports nothing more",
			pushes:   []rollout.Seen{h1, poll("1.1.0", "sha256:b", 5), poll("1.1.0", "sha256:b", 5)},
			reported: []*rollout.Silence{nil, silence(poll("1.1.0", "sha256:b", 5), &h1), nil},
			silent:   silence(poll("1.1.0", "sha256:b", 5), &h1),
		},
		{
			name:     "a webhook's push ends it",
			pushes:   []rollout.Seen{poll("1.1.0", "sha256:b", 5), hook("1.2.0", "sha256:c", 6)},
			reported: []*rollout.Silence{silence(poll("1.1.0", "sha256:b", 5), nil), nil},
		},
		{
			name:     "a late webhook of the version the poll found ends it too",
			pushes:   []rollout.Seen{poll("1.1.0", "sha256:b", 5), hook("1.1.0", "", 5)},
			reported: []*rollout.Silence{silence(poll("1.1.0", "sha256:b", 5), nil), nil},
		},
		{
			name:     "a poll seeing what a webhook brought is no alarm (a digest the sender did not say)",
			pushes:   []rollout.Seen{hook("1.1.0", "", 1), poll("1.1.0", "sha256:b", 5)},
			reported: []*rollout.Silence{nil, nil},
		},
		{
			name:     "the same tag at another digest is another version",
			pushes:   []rollout.Seen{hook("1.1.0", "sha256:b", 1), poll("1.1.0", "sha256:c", 5)},
			reported: []*rollout.Silence{nil, silence(poll("1.1.0", "sha256:c", 5), ptr(hook("1.1.0", "sha256:b", 1)))},
			silent:   silence(poll("1.1.0", "sha256:c", 5), ptr(hook("1.1.0", "sha256:b", 1))),
		},
		{
			name:     "a poll's push recorded after a later webhook's raises no alarm, and stays behind it",
			pushes:   []rollout.Seen{hook("1.2.0", "sha256:c", 6), poll("1.1.0", "sha256:b", 5)},
			reported: []*rollout.Silence{nil, nil},
			last:     ptr(hook("1.2.0", "sha256:c", 6)),
		},
		{
			name:   "a second version missed is reported too",
			pushes: []rollout.Seen{h1, poll("1.1.0", "sha256:b", 5), poll("1.2.0", "sha256:c", 10)},
			reported: []*rollout.Silence{nil, silence(poll("1.1.0", "sha256:b", 5), &h1),
				silence(poll("1.2.0", "sha256:c", 10), &h1)},
			silent: silence(poll("1.2.0", "sha256:c", 10), &h1),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st rollout.AppState
			var reported []*rollout.Silence
			for _, p := range tc.pushes {
				reported = append(reported, st.Saw(p))
			}
			if diff := cmp.Diff(tc.reported, reported); diff != "" {
				t.Errorf("reported (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tc.silent, st.WebhookSilent); diff != "" {
				t.Errorf("WebhookSilent (-want +got)\n%s", diff)
			}
			last := tc.last
			if last == nil {
				last = &tc.pushes[len(tc.pushes)-1]
			}
			if diff := cmp.Diff(last, st.LastSeen); diff != "" {
				t.Errorf("LastSeen (-want +got)\n%s", diff)
			}
		})
	}
}

// Failed notes why the last push is not verified yet, and only that push.
func TestFailed(t *testing.T) {
	var st rollout.AppState
	st.Saw(rollout.Seen{Tag: "1.0.0", EventID: "e1"})
	st.Failed("e0", "an older push")
	st.Failed("e1", "registry: 503")
	want := &rollout.Seen{Tag: "1.0.0", EventID: "e1", Source: rollout.SourceWebhook, Error: "registry: 503"}
	if diff := cmp.Diff(want, st.LastSeen); diff != "" {
		t.Errorf("LastSeen (-want +got)\n%s", diff)
	}
	st.Failed("e1", "")
	if st.LastSeen.Error != "" {
		t.Errorf("Error = %q after it was verified", st.LastSeen.Error)
	}
}

func ptr[T any](v T) *T { return &v }

// Heard: a webhook's push of the repository that is none of the
// application's versions ends a silence, and is only the last webhook.
func TestHeard(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var st rollout.AppState
	poll := rollout.Seen{Tag: "main@aaa", Digest: "aaa", Source: rollout.SourcePoll, At: at, EventID: "p1"}
	st.Saw(poll)
	st.Heard(rollout.Seen{Tag: "next@bbb", Source: rollout.SourcePoll, At: at.Add(time.Minute)})
	if st.WebhookSilent == nil {
		t.Fatal("a poll's push elsewhere ended the silence")
	}
	next := rollout.Seen{Tag: "next@ccc", Digest: "ccc", Source: rollout.SourceWebhook, At: at.Add(2 * time.Minute), EventID: "h2"}
	st.Heard(next)
	want := rollout.AppState{LastSeen: &poll, LastWebhook: &next}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("after a webhook's push elsewhere (-want +got)\n%s", diff)
	}
}
