package embedded

import (
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// While a commit of a rollout is under way its kept version is not read
// (the commit's events may already be handled), a read of the store then
// is not kept, and the commit's end keeps what it committed.
func TestHotCacheDuringACommit(t *testing.T) {
	c := hotCache{byID: map[string]rollout.Rollout{}}
	c.keep(rollout.Rollout{ID: "r1", Version: 1, Wave: 0})
	drops := c.since()
	c.begin("r1")
	if _, ok := c.get("r1"); ok {
		t.Error("the kept version was read during its commit")
	}
	c.putRead(rollout.Rollout{ID: "r1", Version: 1, Wave: 0}, c.since()) // a reader of the store, meanwhile
	c.putRead(rollout.Rollout{ID: "r1", Version: 1, Wave: 0}, drops)     // one that began before the commit
	c.end("r1", &rollout.Rollout{ID: "r1", Version: 2, Wave: 1})
	c.putRead(rollout.Rollout{ID: "r1", Version: 1, Wave: 0}, drops) // a read that began before, kept after the end
	got, ok := c.get("r1")
	if !ok || got.Version != 2 || got.Wave != 1 {
		t.Errorf("after the commit: %+v, %v; want version 2 at wave 1", got, ok)
	}
}
