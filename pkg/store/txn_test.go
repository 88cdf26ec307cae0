package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

func TestTransactAndListBefore(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	type doc struct{ N int }
	if err := s.Transact(ctx, func(tx store.Txn) error {
		for i, k := range []string{"a", "b", "c", "d"} {
			if err := tx.Put("col", k, doc{i}); err != nil {
				return err
			}
		}
		return tx.Put("other", "x", doc{9})
	}); err != nil {
		t.Fatal(err)
	}
	// A failing transaction changes nothing.
	boom := errors.New("boom")
	if err := s.Transact(ctx, func(tx store.Txn) error {
		if err := tx.Delete("col", "a"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Transact = %v, want boom", err)
	}
	if err := s.Transact(ctx, func(tx store.Txn) error {
		var d doc
		if found, err := tx.Get("col", "a", &d); !found || err != nil || d.N != 0 {
			return fmt.Errorf("a = %v, %v: %w", d, found, err)
		}
		return tx.Delete("col", "b")
	}); err != nil {
		t.Fatal(err)
	}
	keys := func(before string, limit int) []string {
		var out []string
		if err := s.ListBefore(ctx, "col", before, limit, func(k string, _ []byte) error {
			out = append(out, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tt := range []struct {
		before string
		limit  int
		want   []string
	}{
		{"", 10, []string{"d", "c", "a"}},
		{"", 2, []string{"d", "c"}},
		{"c", 10, []string{"a"}},
		{"cc", 10, []string{"c", "a"}},
		{"z", 1, []string{"d"}},
		{"a", 10, nil},
	} {
		if diff := cmp.Diff(tt.want, keys(tt.before, tt.limit)); diff != "" {
			t.Errorf("ListBefore(%q, %d) (-want +got):\n%s", tt.before, tt.limit, diff)
		}
	}
}
