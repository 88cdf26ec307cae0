package dispatch

// window tracks the events read and not yet handled, to give the
// watermark: the highest sequence number at or below which every event was
// handled. It is what the dispatcher saves as its cursor, so that a
// restart replays whatever was in flight, never skips it.
type window struct {
	last uint64 // the watermark
	base uint64 // seq of done[head]
	done []bool
	head int
}

func newWindow(cursor uint64) *window { return &window{last: cursor, base: cursor + 1} }

// add records seq as read. Sequence numbers come in order; any skipped
// (none are, in a journal) count as handled.
func (w *window) add(seq uint64) {
	if w.head == len(w.done) {
		w.done, w.head, w.base = w.done[:0], 0, w.last+1
	}
	for next := w.base + uint64(len(w.done)-w.head); next < seq; next++ {
		w.done = append(w.done, true)
	}
	w.done = append(w.done, false)
}

// finish records seq as handled and moves the watermark past every handled
// event at its front. It returns the watermark.
func (w *window) finish(seq uint64) uint64 {
	w.done[w.head+int(seq-w.base)] = true
	for w.head < len(w.done) && w.done[w.head] {
		w.last = w.base
		w.base++
		w.head++
	}
	if w.head > 1024 && w.head > len(w.done)/2 {
		// Keep the slice from growing with history.
		n := copy(w.done, w.done[w.head:])
		w.done, w.head = w.done[:n], 0
	}
	return w.last
}
