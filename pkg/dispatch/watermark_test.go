package dispatch

import "testing"

func TestWindow(t *testing.T) {
	w := newWindow(10)
	for seq := uint64(11); seq <= 15; seq++ {
		w.add(seq)
	}
	steps := []struct {
		finish uint64
		want   uint64
	}{
		{13, 10}, {12, 10}, {11, 13}, {15, 13}, {14, 15},
	}
	for _, s := range steps {
		if got := w.finish(s.finish); got != s.want {
			t.Fatalf("finish(%d) = %d, want %d", s.finish, got, s.want)
		}
	}
	// Empty again: the next reads continue from the watermark.
	w.add(16)
	w.add(18) // 17 skipped: counts as handled
	if got := w.finish(18); got != 15 {
		t.Fatalf("finish(18) before 16 = %d, want 15", got)
	}
	if got := w.finish(16); got != 18 {
		t.Fatalf("finish(16) = %d, want 18", got)
	}
	// Memory stays bounded over a long history.
	for seq := uint64(19); seq < 100_000; seq++ {
		w.add(seq)
		w.finish(seq)
	}
	if cap(w.done) > 4096 {
		t.Errorf("window capacity %d after 100,000 events handled in order", cap(w.done))
	}
}
