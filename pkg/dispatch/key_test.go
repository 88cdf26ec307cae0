package dispatch

import (
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
)

func TestKey(t *testing.T) {
	ev := func(id, typ, subject, rollout string) cloudevents.Event {
		e := cloudevents.NewEvent()
		e.SetID(id)
		e.SetType(typ)
		e.SetSubject(subject)
		if rollout != "" {
			e.SetExtension(events.ExtRolloutID, rollout)
		}
		return e
	}
	tests := []struct {
		e    cloudevents.Event
		want string
	}{
		{ev("1", events.TypeWaveStarted, "", "podinfo-1"), "rollout/podinfo-1"},
		{ev("2", events.TypeCanary, "x", "podinfo-1"), "rollout/podinfo-1"},
		{ev("3", events.TypeImagePushed, "registry.example.com:5000/demo/podinfo:1.1.0", ""), "image/registry.example.com:5000/demo/podinfo"},
		{ev("4", events.TypeImageVerified, "registry.example.com:5000/demo/podinfo:1.2.0", ""), "image/registry.example.com:5000/demo/podinfo"},
		{ev("5", events.TypeImageRejected, "ghcr.io/a/b@sha256:abc", ""), "image/ghcr.io/a/b"},
		{ev("6", events.TypeImagePushed, "localhost/b", ""), "image/localhost/b"},
		{ev("7", events.TypeGitPushed, "https://git.example.com/deploy.git#refs/heads/main", ""), "git/https://git.example.com/deploy.git"},
		{ev("8", events.TypeImagePushed, "", ""), "event/8"},
		{ev("9", events.TypeFunctionFailed, "", ""), "event/9"},
		{ev("10", events.TypeReconcileRequested, "registry.example.com:5000/demo/podinfo@sha256:abc", ""), "image/registry.example.com:5000/demo/podinfo"},
		{ev("11", events.TypeReconcileRequested, "https://git.example.com/deploy.git#0123abc", ""), "git/https://git.example.com/deploy.git"},
	}
	for _, tt := range tests {
		if got := Key(tt.e); got != tt.want {
			t.Errorf("Key(%s %s %q) = %q, want %q", tt.e.ID(), tt.e.Type(), tt.e.Subject(), got, tt.want)
		}
	}
}
