package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// DefaultInterval is how often WatchFile reads the file by default
// (`flotilla serve --config-reload-interval`).
const DefaultInterval = 3 * time.Second

// WatchFile reloads the configuration file at path (Options.Load) when its
// content changes, read every interval (0: never), and at each value hup
// delivers (SIGHUP), until ctx ends. A change is reloaded once the content
// reads the same twice in a row, a moment apart, so that a file caught
// half written is not refused for it. A file that cannot be read is logged
// and read again at the next interval; the running configuration stays.
func (r *Reloader) WatchFile(ctx context.Context, path string, interval time.Duration, hup <-chan os.Signal) error {
	load := func() (*config.Config, error) { return r.o.Load(path) }
	last, _ := sum(path)
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	settle := min(interval/4, 500*time.Millisecond)
	unreadable := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if s, err := sum(path); err == nil {
				last = s
			}
			r.Reload(ctx, "SIGHUP", load)
		case <-tick:
			s, err := sum(path)
			if err != nil {
				if !unreadable {
					r.o.Logger.Warn("reading the configuration file to see whether it changed; the running configuration stays", "path", path, "error", err)
				}
				unreadable = true
				continue
			}
			unreadable = false
			if bytes.Equal(s, last) {
				continue
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(settle):
			}
			if again, err := sum(path); err != nil || !bytes.Equal(again, s) {
				continue // still being written: the next tick sees it
			}
			last = s
			r.Reload(ctx, "file changed", load)
		}
	}
}

// sum is the hash of the file's content (through symlinks: a ConfigMap's
// ..data swap changes it).
func sum(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(data)
	return h[:], nil
}
