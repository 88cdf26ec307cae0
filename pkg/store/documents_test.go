package store_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

type rollout struct {
	ID    string `json:"id"`
	Wave  int    `json:"wave"`
	Phase string `json:"phase"`
}

func TestPutGet(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()

	var got rollout
	found, err := s.Get(ctx, "rollouts", "r1", &got)
	if err != nil || found {
		t.Fatalf("Get before Put = %v, %v; want not found", found, err)
	}

	want := rollout{ID: "r1", Wave: 2, Phase: "progressing"}
	if err := s.Put(ctx, "rollouts", "r1", want); err != nil {
		t.Fatalf("Put: %v", err)
	}
	found, err = s.Get(ctx, "rollouts", "r1", &got)
	if err != nil || !found {
		t.Fatalf("Get = %v, %v; want found", found, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}

	// Same key in another collection is another document.
	found, err = s.Get(ctx, "other", "r1", &got)
	if err != nil || found {
		t.Errorf("Get(other/r1) = %v, %v; want not found", found, err)
	}
}

func TestPutRejectsEmptyNames(t *testing.T) {
	s, _ := openStore(t)
	tests := []struct{ name, collection, key string }{
		{name: "empty collection", key: "k"},
		{name: "empty key", collection: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Put(t.Context(), tt.collection, tt.key, 1); err == nil {
				t.Error("Put succeeded, want error")
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	errAbort := errors.New("abort")
	tests := []struct {
		name      string
		initial   *rollout // nil: no document
		fn        func(r *rollout, found bool) error
		wantFound bool
		wantErr   error
		want      *rollout // nil: no document afterwards
	}{
		{
			name: "creates",
			fn: func(r *rollout, _ bool) error {
				r.ID, r.Phase = "r1", "new"
				return nil
			},
			want: &rollout{ID: "r1", Phase: "new"},
		},
		{
			name:    "modifies",
			initial: &rollout{ID: "r1", Wave: 1, Phase: "progressing"},
			fn: func(r *rollout, _ bool) error {
				r.Wave++
				return nil
			},
			wantFound: true,
			want:      &rollout{ID: "r1", Wave: 2, Phase: "progressing"},
		},
		{
			name:    "error aborts",
			initial: &rollout{ID: "r1", Wave: 1},
			fn: func(r *rollout, _ bool) error {
				r.Wave = 99
				return errAbort
			},
			wantFound: true,
			wantErr:   errAbort,
			want:      &rollout{ID: "r1", Wave: 1},
		},
		{
			name: "error aborts create",
			fn: func(r *rollout, _ bool) error {
				r.ID = "r1"
				return errAbort
			},
			wantErr: errAbort,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := t.Context()
			if tt.initial != nil {
				if err := s.Put(ctx, "rollouts", "r1", tt.initial); err != nil {
					t.Fatalf("Put: %v", err)
				}
			}
			var r rollout
			var gotFound bool
			err := s.Update(ctx, "rollouts", "r1", &r, func(found bool) error {
				gotFound = found
				return tt.fn(&r, found)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update error = %v, want %v", err, tt.wantErr)
			}
			if gotFound != tt.wantFound {
				t.Errorf("fn got found = %v, want %v", gotFound, tt.wantFound)
			}
			var got rollout
			found, err := s.Get(ctx, "rollouts", "r1", &got)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if found != (tt.want != nil) {
				t.Fatalf("document found = %v, want %v", found, tt.want != nil)
			}
			if tt.want != nil {
				if diff := cmp.Diff(*tt.want, got); diff != "" {
					t.Errorf("document (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestUpdateConcurrent(t *testing.T) {
	const goroutines = 100
	s, _ := openStore(t)
	ctx := t.Context()

	type counter struct{ N int }
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			var c counter
			if err := s.Update(ctx, "counters", "c", &c, func(bool) error {
				c.N++
				return nil
			}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Update: %v", err)
	}
	var c counter
	if _, err := s.Get(ctx, "counters", "c", &c); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if c.N != goroutines {
		t.Errorf("counter = %d, want %d", c.N, goroutines)
	}
}

func TestList(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	for _, k := range []string{"c", "a", "b"} {
		if err := s.Put(ctx, "rollouts", k, rollout{ID: k}); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	if err := s.Put(ctx, "other", "z", rollout{ID: "z"}); err != nil {
		t.Fatalf("Put: %v", err)
	}

	tests := []struct {
		collection string
		want       []string
	}{
		{collection: "rollouts", want: []string{"a", "b", "c"}},
		{collection: "other", want: []string{"z"}},
		{collection: "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.collection, func(t *testing.T) {
			var keys []string
			err := s.List(ctx, tt.collection, func(key string, raw []byte) error {
				var r rollout
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				if r.ID != key {
					t.Errorf("document under %q has id %q", key, r.ID)
				}
				keys = append(keys, key)
				return nil
			})
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(tt.want, keys, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}

	stop := errors.New("stop")
	n := 0
	err := s.List(ctx, "rollouts", func(string, []byte) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("List with failing fn = %v after %d calls, want stop after 1", err, n)
	}
}

func TestCursors(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	tests := []struct {
		name     string
		consumer string
		set      []uint64
		want     uint64
	}{
		{name: "none", consumer: "nobody", want: 0},
		{name: "set", consumer: "router", set: []uint64{7}, want: 7},
		{name: "last wins", consumer: "scheduler", set: []uint64{3, 9, 5}, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, seq := range tt.set {
				if err := s.SetCursor(ctx, tt.consumer, seq); err != nil {
					t.Fatalf("SetCursor: %v", err)
				}
			}
			got, err := s.Cursor(ctx, tt.consumer)
			if err != nil {
				t.Fatalf("Cursor: %v", err)
			}
			if got != tt.want {
				t.Errorf("Cursor = %d, want %d", got, tt.want)
			}
		})
	}
}

// Delete removes one document; deleting one that is not there, or of a
// collection that is not, is no error.
func TestDelete(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()
	for _, k := range []string{"a", "b"} {
		if err := s.Put(ctx, "sessions", k, rollout{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "a", "missing"} {
		if err := s.Delete(ctx, "sessions", k); err != nil {
			t.Errorf("Delete(%s): %v", k, err)
		}
	}
	if err := s.Delete(ctx, "missing", "a"); err != nil {
		t.Errorf("Delete in a missing collection: %v", err)
	}
	var keys []string
	if err := s.List(ctx, "sessions", func(key string, _ []byte) error { keys = append(keys, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, keys); diff != "" {
		t.Errorf("keys after the deletes (-want +got):\n%s", diff)
	}
}
