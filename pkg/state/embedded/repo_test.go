package embedded_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// clock is an injected clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newRepo returns a Repo over a real store in a temporary directory.
func newRepo(t *testing.T, now func() time.Time) *embedded.Repo {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	return embedded.NewRepo(s, now)
}

func sample(id string) rollout.Rollout {
	return rollout.Rollout{
		ID: id, Application: "app", Image: "registry.test/team/app", Tag: "1.2.3", Digest: "sha256:abc",
		Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}},
	}
}

func TestRepoCreateGet(t *testing.T) {
	c := newClock()
	repo := newRepo(t, c.Now)
	ctx := t.Context()

	created, err := repo.Create(ctx, sample("r1"))
	if err != nil || !created {
		t.Fatalf("first Create = %v, %v; want true, nil", created, err)
	}
	want := sample("r1")
	want.Created, want.Updated, want.Version = c.Now(), c.Now(), 1
	got, err := repo.Get(ctx, "r1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get after Create (-want +got):\n%s", diff)
	}

	// A redelivered event creates again: nothing changes.
	c.Advance(time.Minute)
	again := sample("r1")
	again.Tag = "9.9.9"
	created, err = repo.Create(ctx, again)
	if err != nil || created {
		t.Fatalf("second Create = %v, %v; want false, nil", created, err)
	}
	got, err = repo.Get(ctx, "r1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get after the second Create (-want +got):\n%s", diff)
	}
}

func TestRepoCreateStampsOneInstant(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ticking := func() time.Time { // every reading is a second later
		now = now.Add(time.Second)
		return now
	}
	repo := newRepo(t, ticking)
	if _, err := repo.Create(t.Context(), sample("r1")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := repo.Get(t.Context(), "r1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !got.Created.Equal(got.Updated) {
		t.Errorf("Created %s != Updated %s for a new rollout", got.Created, got.Updated)
	}
}

func TestRepoGetUnknown(t *testing.T) {
	repo := newRepo(t, nil)
	_, err := repo.Get(t.Context(), "nope")
	if !errors.Is(err, rollout.ErrNotFound) {
		t.Errorf("Get(unknown) error = %v, want ErrNotFound", err)
	}
}

func TestRepoUpdate(t *testing.T) {
	c := newClock()
	repo := newRepo(t, c.Now)
	ctx := t.Context()
	if _, err := repo.Create(ctx, sample("r1")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	created := c.Now()
	c.Advance(time.Minute)

	got, err := repo.Update(ctx, "r1", func(r *rollout.Rollout) error {
		r.Phase = rollout.Failed
		r.Waves[0].Clusters[0].Phase = rollout.ClusterFailed
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	want := sample("r1")
	want.Phase = rollout.Failed
	want.Waves[0].Clusters[0].Phase = rollout.ClusterFailed
	want.Created, want.Updated, want.Version = created, c.Now(), 2
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Update returned (-want +got):\n%s", diff)
	}
	stored, err := repo.Get(ctx, "r1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored after Update (-want +got):\n%s", diff)
	}
}

func TestRepoUpdateErrors(t *testing.T) {
	repo := newRepo(t, nil)
	ctx := t.Context()
	if _, err := repo.Create(ctx, sample("r1")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	errBoom := errors.New("boom")

	tests := []struct {
		name string
		id   string
		fn   func(*rollout.Rollout) error
		want error
	}{
		{"missing rollout", "nope", func(*rollout.Rollout) error { return nil }, rollout.ErrNotFound},
		{"fn fails", "r1", func(r *rollout.Rollout) error { r.Phase = rollout.Failed; return errBoom }, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			_, err := repo.Update(ctx, tt.id, func(r *rollout.Rollout) error {
				called = true
				return tt.fn(r)
			})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Update error = %v, want %v", err, tt.want)
			}
			if errors.Is(tt.want, rollout.ErrNotFound) && called {
				t.Error("fn called for a missing rollout")
			}
		})
	}

	// A failed fn writes nothing, and a missing rollout is not created.
	got, err := repo.Get(ctx, "r1")
	if err != nil || got.Phase != rollout.Progressing {
		t.Errorf("after a failed Update, Get = phase %s, %v; want Progressing", got.Phase, err)
	}
	if _, err := repo.Get(ctx, "nope"); !errors.Is(err, rollout.ErrNotFound) {
		t.Errorf("Update of a missing rollout created it: Get error = %v", err)
	}
}

func TestRepoListNewestFirst(t *testing.T) {
	c := newClock()
	repo := newRepo(t, c.Now)
	ctx := t.Context()

	page, err := repo.List(ctx, "", 10)
	if err != nil || len(page.Rollouts) != 0 || page.Next != "" {
		t.Fatalf("List of an empty repo = %v, %v; want nothing", page, err)
	}
	// Keys sort the other way round from creation, so the order comes from
	// the creation time, not the store.
	for _, id := range []string{"c", "a", "b"} {
		if _, err := repo.Create(ctx, sample(id)); err != nil {
			t.Fatalf("Create(%s): %v", id, err)
		}
		c.Advance(time.Second)
	}
	// An update does not reorder.
	if _, err := repo.Update(ctx, "c", func(r *rollout.Rollout) error { r.Reason = "touched"; return nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	page, err = repo.List(ctx, "", 10)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, r := range page.Rollouts {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"b", "a", "c"}, ids); diff != "" {
		t.Errorf("List order (-want +got):\n%s", diff)
	}
}

func TestRepoApp(t *testing.T) {
	repo := newRepo(t, nil)
	ctx := t.Context()

	got, err := repo.App(ctx, "app")
	if err != nil {
		t.Fatalf("App: %v", err)
	}
	if diff := cmp.Diff(rollout.AppState{Name: "app"}, got); diff != "" {
		t.Errorf("App before any update (-want +got):\n%s", diff)
	}

	steps := []struct {
		name string
		fn   func(*rollout.AppState) error
		want rollout.AppState
	}{
		{"start a rollout", func(s *rollout.AppState) error {
			s.LatestTag, s.LatestRollout = "1.2.3", "r1"
			return nil
		}, rollout.AppState{Name: "app", LatestTag: "1.2.3", LatestRollout: "r1"}},
		{"deploy it", func(s *rollout.AppState) error {
			s.DeployedTag, s.DeployedDigest = "1.2.3", "sha256:abc"
			return nil
		}, rollout.AppState{Name: "app", LatestTag: "1.2.3", LatestRollout: "r1", DeployedTag: "1.2.3", DeployedDigest: "sha256:abc"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := repo.UpdateApp(ctx, "app", s.fn); err != nil {
				t.Fatalf("UpdateApp: %v", err)
			}
			got, err := repo.App(ctx, "app")
			if err != nil {
				t.Fatalf("App: %v", err)
			}
			if diff := cmp.Diff(s.want, got); diff != "" {
				t.Errorf("App (-want +got):\n%s", diff)
			}
		})
	}

	// A failing fn changes nothing.
	errBoom := errors.New("boom")
	err = repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.LatestTag, s.Name = "6.6.6", "other"
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("UpdateApp error = %v, want %v", err, errBoom)
	}
	if got, _ := repo.App(ctx, "app"); got.LatestTag != "1.2.3" {
		t.Errorf("after a failed UpdateApp LatestTag = %q, want 1.2.3", got.LatestTag)
	}
}

// A finished rollout leaves the hot set: ListInFlight (what resync reads)
// no longer has it, Get still does, a late change does not change it, a
// redelivered start does not create it again, and the list pages through
// the archive newest first.
func TestRepoArchivesFinishedRollouts(t *testing.T) {
	c := newClock()
	repo := newRepo(t, c.Now)
	ctx := t.Context()
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		if _, err := repo.Create(ctx, sample(id)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	finish := func(id string, p rollout.Phase) {
		t.Helper()
		if _, err := repo.Update(ctx, id, func(r *rollout.Rollout) error { r.Phase = p; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	finish("r1", rollout.Succeeded)
	finish("r2", rollout.RolledBack)
	finish("r3", rollout.RollbackFailed) // waits for a retry: still hot

	ids := func(ros []rollout.Rollout) []string {
		var out []string
		for _, r := range ros {
			out = append(out, r.ID)
		}
		return out
	}
	inFlight, err := repo.ListInFlight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r4", "r3"}, ids(inFlight)); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	got, err := repo.Get(ctx, "r1")
	if err != nil || got.Phase != rollout.Succeeded {
		t.Fatalf("Get(archived) = %v, %v", got.Phase, err)
	}
	after, err := repo.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Reason = "late"; return nil })
	if err != nil || after.Reason != "" {
		t.Errorf("Update of an archived rollout = %q, %v; want it unchanged", after.Reason, err)
	}
	if created, err := repo.Create(ctx, sample("r1")); created || err != nil {
		t.Errorf("Create of an archived rollout = %v, %v; want not created", created, err)
	}
	page, err := repo.List(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r4", "r3", "r2"}, ids(page.Rollouts)); diff != "" || page.Next == "" {
		t.Errorf("first page (-want +got):\n%s (next %q)", diff, page.Next)
	}
	page, err = repo.List(ctx, page.Next, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r1"}, ids(page.Rollouts)); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	if page, err = repo.List(ctx, page.Next, 1); err != nil || len(page.Rollouts) != 0 || page.Next != "" {
		t.Errorf("third page = %v, %v; want the end", page, err)
	}
}
