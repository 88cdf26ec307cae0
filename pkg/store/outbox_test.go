package store_test

import (
	"context"
	"errors"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
)

func TestUpdateAndAppend(t *testing.T) {
	ctx := context.Background()
	mk := func(id string) cloudevents.Event {
		t.Helper()
		e, err := newEvent(id)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	type doc struct{ N int }
	tests := []struct {
		name      string
		journaled []string // already in the journal
		emit      []string
		fail      bool
		wantNew   []string
		wantDoc   int
		wantIDs   []string // the whole journal after the call
	}{
		{name: "state and events together", emit: []string{"a", "b"}, wantNew: []string{"a", "b"}, wantDoc: 1, wantIDs: []string{"a", "b"}},
		{name: "journaled ids are skipped", journaled: []string{"a"}, emit: []string{"a", "b"}, wantNew: []string{"b"}, wantDoc: 1, wantIDs: []string{"a", "b"}},
		{name: "a failing fn writes neither", journaled: []string{"x"}, emit: []string{"a"}, fail: true, wantDoc: 0, wantIDs: []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			for _, id := range tt.journaled {
				if _, err := s.Append(ctx, mk(id)); err != nil {
					t.Fatal(err)
				}
			}
			changed := s.Changed()
			var d doc
			recs, err := s.UpdateAndAppend(ctx, "docs", "k", &d, func(bool) ([]cloudevents.Event, error) {
				d.N++
				var evs []cloudevents.Event
				for _, id := range tt.emit {
					evs = append(evs, mk(id))
				}
				if tt.fail {
					return evs, errors.New("refused")
				}
				return evs, nil
			})
			if (err != nil) != tt.fail {
				t.Fatalf("err = %v, want failure %v", err, tt.fail)
			}
			var gotNew []string
			for _, r := range recs {
				gotNew = append(gotNew, r.Event.ID())
			}
			if diff := cmp.Diff(tt.wantNew, gotNew); diff != "" {
				t.Errorf("new records (-want +got):\n%s", diff)
			}
			var got doc
			if _, err := s.Get(ctx, "docs", "k", &got); err != nil {
				t.Fatal(err)
			}
			if got.N != tt.wantDoc {
				t.Errorf("document N = %d, want %d", got.N, tt.wantDoc)
			}
			all, err := s.Read(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range all {
				ids = append(ids, r.Event.ID())
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("journal (-want +got):\n%s", diff)
			}
			if len(tt.wantNew) > 0 {
				select {
				case <-changed:
				default:
					t.Error("Changed() did not fire")
				}
				if s.LastSeq() != all[len(all)-1].Seq {
					t.Errorf("LastSeq = %d, want %d", s.LastSeq(), all[len(all)-1].Seq)
				}
			}
		})
	}
}
