package store

import (
	"crypto/sha256"
	"time"
)

// The dedupe index: which event ids the journal has, so that Append skips
// a repeated one. It covers a bounded window, a segment at a time: each
// segment's ids are one generation (a set), and forgetting a segment's ids
// drops its set whole, which gives its memory back (a Go map never shrinks
// when entries are deleted from it). An id is kept as a 16-byte key (the
// start of its SHA-256): about 30 bytes of memory per event, whatever the
// id's length, and a collision no sender can arrange.

// idKey is the dedupe key of an event id.
type idKey [16]byte

func keyOf(id string) idKey {
	sum := sha256.Sum256([]byte(id))
	return idKey(sum[:16])
}

// idGen is the ids of one segment.
type idGen struct {
	first   uint64 // the segment's first seq
	written time.Time
	keys    map[idKey]struct{}
}

// idIndex is the generations of ids, oldest first. Not safe for concurrent
// use: the store guards it with idsMu.
type idIndex struct {
	gens  []*idGen
	count int // keys in all generations
}

// has reports whether k is in any generation.
func (x *idIndex) has(k idKey) bool {
	for i := len(x.gens) - 1; i >= 0; i-- {
		if _, ok := x.gens[i].keys[k]; ok {
			return true
		}
	}
	return false
}

// add puts k into the generation of the segment starting at first, written
// at the time given, starting that generation if it is new.
func (x *idIndex) add(first uint64, written time.Time, k idKey) {
	g := x.gen(first)
	g.written = written
	if _, ok := g.keys[k]; !ok {
		g.keys[k] = struct{}{}
		x.count++
	}
}

func (x *idIndex) gen(first uint64) *idGen {
	if n := len(x.gens); n > 0 && x.gens[n-1].first == first {
		return x.gens[n-1]
	}
	g := &idGen{first: first, keys: map[idKey]struct{}{}}
	x.gens = append(x.gens, g)
	return g
}

// evict forgets the ids of the oldest generations, never the newest
// (the segment being written): those written before cutoff, and then,
// while the index holds more than maxIDs (0: no bound), the oldest ones
// whose removal leaves at least maxIDs. It returns how many ids it forgot.
func (x *idIndex) evict(cutoff time.Time, maxIDs int) int {
	n, forgot := 0, 0
	for n < len(x.gens)-1 {
		g := x.gens[n]
		old := g.written.Before(cutoff)
		over := maxIDs > 0 && x.count-len(g.keys) >= maxIDs
		if !old && !over {
			break
		}
		x.count -= len(g.keys)
		forgot += len(g.keys)
		n++
	}
	clear(x.gens[:n])
	x.gens = x.gens[n:]
	return forgot
}

// dropBefore forgets the generations of segments before first (removed by
// retention) and returns how many ids it forgot.
func (x *idIndex) dropBefore(first uint64) int {
	n, forgot := 0, 0
	for n < len(x.gens) && x.gens[n].first < first {
		x.count -= len(x.gens[n].keys)
		forgot += len(x.gens[n].keys)
		n++
	}
	clear(x.gens[:n])
	x.gens = x.gens[n:]
	return forgot
}
