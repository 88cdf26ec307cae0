package api

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// The watch stream keeps what its principal may read: a rollout's
// messages by its application's project, events of no rollout by the
// application they name, the fleet's for everyone.
func TestWatchFilter(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for id, app := range map[string]string{"a1": "shop", "b1": "cart"} {
		if _, err := repo.Create(t.Context(), rollout.Rollout{ID: id, Application: app, Phase: rollout.Progressing}); err != nil {
			t.Fatal(err)
		}
	}
	az, err := authz.New(&config.Config{
		Applications: []config.Application{{Name: "shop"}, {Name: "cart"}},
		Projects: []config.Project{{Name: "a", Applications: []string{"shop"}, Roles: []config.ProjectRole{
			{Name: "viewer", Subjects: []string{"token:view-a"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := New(repo, nil, s, nil).WithAuthorizer(az, nil)
	msgs := []watch.Message{
		{Kind: watch.KindEvent, Seq: 1, Rollout: "a1", Data: []byte(`{"id":"e1"}`)},
		{Kind: watch.KindEvent, Seq: 2, Rollout: "b1", Data: []byte(`{"id":"e2"}`)},
		{Kind: watch.KindRollout, Seq: 3, Rollout: "a1", Data: []byte(`{"id":"a1","application":"shop"}`)},
		{Kind: watch.KindRollout, Seq: 4, Rollout: "b2", Data: []byte(`{"id":"b2","application":"cart"}`)},
		{Kind: watch.KindEvent, Seq: 5, Data: []byte(`{"id":"push-shop","data":{"application":"shop"}}`)},
		{Kind: watch.KindEvent, Seq: 6, Data: []byte(`{"id":"push-cart","data":{"application":"cart"}}`)},
		{Kind: watch.KindEvent, Seq: 7, Data: []byte(`{"id":"fleet-stopped","data":{"reason":"x"}}`)},
		{Kind: watch.KindEvent, Seq: 8, Rollout: "gone", Data: []byte(`{"id":"e8"}`)},
	}
	ctx := identity.WithPrincipal(t.Context(), identity.OfToken("view-a", identity.ViaToken))
	f := a.watchFilter(ctx)
	var kept []uint64
	for _, m := range msgs {
		if f.keep(m) {
			kept = append(kept, m.Seq)
		}
	}
	if diff := cmp.Diff([]uint64{1, 3, 5, 7}, kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if got := drain(msgs[1], nil, f.keep); got != "" {
		t.Errorf("drain of a message not kept = %q, want nothing", got)
	}
}
