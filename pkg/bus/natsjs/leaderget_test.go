package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
)

// A bucket opened by EnsureKeyValue reads through its stream's leader
// (STREAM.MSG.GET, which only the leader answers), never through a direct
// get (which any replica answers, one that has not applied the last
// write included: they do not read your writes). What it reads is what
// nats.go's own Get reads: a value, a deleted or purged key, a missing
// one, an invalid one. The requests are counted on the wire: nats.go's
// Get of the same bucket is counted as a direct get, so the count can
// fail.
func TestBucketsReadThroughTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	nc := connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("LEADERGET%d", streams.Add(1))
	kv, err := natsjs.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{Bucket: bucket, Replicas: 3, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "a", []byte("two")); err != nil {
		t.Fatal(err)
	}
	for key, write := range map[string]func(string) error{
		"deleted": func(k string) error { return kv.Delete(ctx, k) },
		"purged":  func(k string) error { return kv.Purge(ctx, k) },
	} {
		if _, err := kv.Put(ctx, key, []byte("gone")); err != nil {
			t.Fatal(err)
		}
		if err := write(key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "app.x/y=z", []byte("three")); err != nil {
		t.Fatal(err)
	}

	count := func(subject string) *atomic.Int64 {
		var n atomic.Int64
		sub, err := nc.Subscribe(subject, func(*nats.Msg) { n.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		return &n
	}
	direct := count("$JS.API.DIRECT.GET.KV_" + bucket + ".>")
	leader := count("$JS.API.STREAM.MSG.GET.KV_" + bucket)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	type read struct {
		Value    string
		Revision uint64
		Bucket   string
		Op       string
		Err      string
	}
	get := func(b jetstream.KeyValue, key string) read {
		e, err := b.Get(ctx, key)
		if err != nil {
			return read{Err: err.Error()}
		}
		return read{Value: string(e.Value()), Revision: e.Revision(), Bucket: e.Bucket(), Op: e.Operation().String()}
	}
	keys := []string{"a", "deleted", "purged", "missing", "app.x/y=z", "a..b", ".a", "a*"}
	for _, key := range keys {
		want := get(plain, key)
		if diff := cmp.Diff(want, get(kv, key)); diff != "" {
			t.Errorf("Get(%q) (-nats.go's +the leader's):\n%s", key, diff)
		}
	}
	if e, err := kv.Get(ctx, "a"); err != nil || string(e.Value()) != "two" || e.Created().IsZero() {
		t.Errorf("Get(a) = %v, %v; want two, with its time", e, err)
	}
	if _, err := kv.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("Get(missing) = %v, want ErrKeyNotFound", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	valid := int64(5) // the keys a request is sent for, each read by both and once more each above
	for (direct.Load() < valid || leader.Load() < valid+2) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if direct.Load() != valid || leader.Load() != valid+2 {
		t.Errorf("requests: %d direct gets (nats.go's Get: want %d), %d leader gets (want %d)", direct.Load(), valid, leader.Load(), valid+2)
	}
}
