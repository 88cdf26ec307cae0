package embedded

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// decodedCache keeps, by id, the bytes of each rollout in flight as last
// read or written and the rollout they decode to, so that an update whose
// document is still those bytes does not decode them again. Decoding is
// most of an update of a large rollout: a wave of 1,000 clusters is a
// document of about 360 kB, 23 ms to decode against 2 ms to encode, and
// observe updates it for every burst of the wave's events (BENCHMARKS.md,
// "One wave of 1,000 clusters"). The bytes are the key: bytes written by a
// transaction that did not commit never match what the store holds, so
// the cache needs no part in the store's transactions. Rollouts leave it
// when they are archived (drop).
type decodedCache struct {
	mu sync.Mutex
	// byID keeps the last two documents of each id: an update encodes
	// the next version inside its transaction, and reads of the store
	// until its commit still see the one before.
	byID map[string][2]decoded
	// decodes counts the documents decoded: what the cache did not spare.
	decodes int
}

type decoded struct {
	raw []byte
	ro  rollout.Rollout
}

// lookup returns a copy of the rollout raw decodes to, if raw is one of
// the documents kept for id.
func (c *decodedCache) lookup(id string, raw []byte) (rollout.Rollout, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.byID[id] {
		if d.raw != nil && bytes.Equal(d.raw, raw) {
			return d.ro.Clone(), true
		}
	}
	return rollout.Rollout{}, false
}

// put keeps raw, which nobody may change afterwards, as the latest
// document of id, decoding to ro; the one before it stays too.
func (c *decodedCache) put(id string, raw []byte, ro rollout.Rollout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string][2]decoded{}
	}
	kept := c.byID[id]
	if kept[0].raw != nil && bytes.Equal(kept[0].raw, raw) {
		return
	}
	c.byID[id] = [2]decoded{{raw: raw, ro: ro.Clone()}, kept[0]}
}

func (c *decodedCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}

// rolloutDoc is rollout id's document as the store reads and writes it
// (a store.Codec), decoded through the cache.
type rolloutDoc struct {
	id    string
	ro    *rollout.Rollout
	cache *decodedCache
}

// DecodeDocument sets the rollout to what raw decodes to.
func (d rolloutDoc) DecodeDocument(raw []byte) error {
	if ro, ok := d.cache.lookup(d.id, raw); ok {
		*d.ro = ro
		return nil
	}
	d.cache.mu.Lock()
	d.cache.decodes++
	d.cache.mu.Unlock()
	var ro rollout.Rollout
	if err := json.Unmarshal(raw, &ro); err != nil {
		return err
	}
	*d.ro = ro
	d.cache.put(d.id, bytes.Clone(raw), ro)
	return nil
}

// EncodeDocument encodes the rollout, and keeps what it encoded.
func (d rolloutDoc) EncodeDocument() ([]byte, error) {
	raw, err := json.Marshal(d.ro)
	if err != nil {
		return nil, err
	}
	d.cache.put(d.id, raw, *d.ro)
	return raw, nil
}
