package runtime

import (
	"context"
	"sync"
)

// cursorSaver saves the runtime's cursor in the background: set records the
// latest position and returns at once; the saver writes whatever is latest
// when it gets to it, so positions set while a save runs collapse into one
// save.
type cursorSaver struct {
	rt   *Runtime
	kick chan struct{} // buffered: a pending save
	done chan struct{}

	mu     sync.Mutex
	latest uint64
	saved  uint64
	err    error // the last save's error, reported by the next set
	quit   chan struct{}
}

func newCursorSaver(rt *Runtime, saved uint64) *cursorSaver {
	return &cursorSaver{
		rt:     rt,
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		quit:   make(chan struct{}),
		latest: saved,
		saved:  saved,
	}
}

// set records cursor as the position to save. It returns the error of a
// save that failed since the last call, which stops the runtime: a store
// that cannot save a cursor cannot journal either.
func (c *cursorSaver) set(cursor uint64) error {
	c.mu.Lock()
	c.latest = cursor
	err := c.err
	c.err = nil
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return err
}

// run saves positions until stop.
func (c *cursorSaver) run(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		}
		c.mu.Lock()
		cursor, saved := c.latest, c.saved
		c.mu.Unlock()
		if cursor == saved {
			continue
		}
		err := c.rt.saveCursor(ctx, cursor)
		c.mu.Lock()
		if err == nil {
			c.saved, c.err = cursor, nil
		} else {
			c.err = err
		}
		c.mu.Unlock()
	}
}

// stop ends run after the save in progress, if any.
func (c *cursorSaver) stop() {
	close(c.quit)
	<-c.done
}
