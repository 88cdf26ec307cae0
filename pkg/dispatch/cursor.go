package dispatch

import (
	"context"
	"sync"
	"time"
)

// cursorSaver saves the dispatcher's watermark in the background: set
// records the latest position and returns at once; the saver writes
// whatever is latest when it gets to it, so positions set while a save runs
// collapse into one save. A save that fails stalls the dispatcher visibly
// (Err) and is retried with a growing backoff until one works; meanwhile
// the reader reads nothing new, so that a restart replays a bounded window.
type cursorSaver struct {
	d    *Dispatcher
	kick chan struct{} // buffered: a pending save
	done chan struct{}
	quit chan struct{}

	mu      sync.Mutex
	latest  uint64
	saved   uint64
	failing bool
}

func newCursorSaver(d *Dispatcher, saved uint64) *cursorSaver {
	return &cursorSaver{
		d:      d,
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		quit:   make(chan struct{}),
		latest: saved,
		saved:  saved,
	}
}

// set records cursor as the position to save.
func (c *cursorSaver) set(cursor uint64) {
	c.mu.Lock()
	c.latest = max(c.latest, cursor)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// healthy tells whether the last save worked.
func (c *cursorSaver) healthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.failing
}

// run saves positions until stop.
func (c *cursorSaver) run(ctx context.Context) {
	defer close(c.done)
	delay := c.d.o.StallBackoff
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
		err := c.d.saveCursor(ctx, cursor)
		c.mu.Lock()
		c.failing = err != nil
		if err == nil {
			c.saved = cursor
		}
		c.mu.Unlock()
		if err == nil {
			if delay != c.d.o.StallBackoff {
				c.d.unstall()
			}
			delay = c.d.o.StallBackoff
			continue
		}
		c.d.stall(err, delay)
		select {
		case <-c.quit:
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
		c.set(cursor) // try again
	}
}

// stop ends run after the save in progress, if any.
func (c *cursorSaver) stop() {
	close(c.quit)
	<-c.done
}
