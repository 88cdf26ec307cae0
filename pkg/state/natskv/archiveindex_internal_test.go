package natskv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// The index pages the archive's keys from its watch (never listing every
// key): newest first, before a key, limited; it follows writes and deletes
// from another connection, and answers only once it has seen the
// archive's last write.
func TestArchiveIndexPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bucket := connectedBucket(ctx, t, "ARCHIVE")
	reader, writer := bucket(), bucket()
	put := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if _, err := writer.Put(ctx, k, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("01.a", "id.a", "02.b", "id.b")
	x := newArchiveIndex(reader)
	check := func(step, before string, limit int, want []string, wantMore bool) {
		t.Helper()
		got, more, ok := x.page(ctx, before, limit)
		if !ok {
			t.Fatalf("%s: the index is not up to date", step)
		}
		if diff := cmp.Diff(want, got); diff != "" || more != wantMore {
			t.Errorf("%s: page (-want +got):\n%s more = %v, want %v", step, diff, more, wantMore)
		}
	}
	check("first", "", 0, []string{"02.b", "01.a"}, false)
	put("03.c", "id.c", "04.d")
	check("written by another", "", 2, []string{"04.d", "03.c"}, true)
	check("next page", "03.c", 2, []string{"02.b", "01.a"}, false)
	if err := writer.Purge(ctx, "02.b"); err != nil {
		t.Fatal(err)
	}
	check("purged", "", 0, []string{"04.d", "03.c", "01.a"}, false)
	x.mu.Lock()
	live := x.live
	x.mu.Unlock()
	if !live {
		t.Error("the index's watch is not running")
	}
}

// A page of 50 from an archive of 10,000 finished rollouts: from the
// index, and by listing every key (what List did before it).
func BenchmarkArchivePage(b *testing.B) {
	ctx := context.Background()
	c, err := natstest.Start(ctx, b.TempDir(), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	nc, err := nats.Connect(c.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ARCHIVE", History: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if _, err := kv.Put(ctx, fmt.Sprintf("%020d.r%d", i, i), []byte("{}")); err != nil {
			b.Fatal(err)
		}
	}
	r := &Repo{archive: kv, index: newArchiveIndex(kv)}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if keys, _, ok := r.index.page(ctx, "", 50); !ok || len(keys) != 50 {
				b.Fatalf("page = %d keys, ok %v", len(keys), ok)
			}
		}
	})
	b.Run("list-keys", func(b *testing.B) {
		for b.Loop() {
			if keys, _, err := r.listPage(ctx, "", 50); err != nil || len(keys) != 50 {
				b.Fatalf("page = %d keys, %v", len(keys), err)
			}
		}
	})
}

// connectedBucket starts a one-node NATS server for the test and returns
// a function opening bucket name on a connection of its own each call
// (closed at the test's end): a reader and a writer, as two replicas.
func connectedBucket(ctx context.Context, t *testing.T, name string) func() jetstream.KeyValue {
	t.Helper()
	c, err := natstest.Start(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return func() jetstream.KeyValue {
		t.Helper()
		nc, err := nats.Connect(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
}
