package intake

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// maxLoggedID bounds an id (event or delivery) in a log line: ids come
// from senders, and a refused 100 KB id must not make a 100 KB line.
const maxLoggedID = 128

// logID returns id, cut to maxLoggedID bytes with its full length noted.
func logID(id string) string {
	if len(id) <= maxLoggedID {
		return id
	}
	return fmt.Sprintf("%s…(%d bytes)", id[:maxLoggedID], len(id))
}

// maxLoggedIDs bounds the ids of one delivery in a log line.
const maxLoggedIDs = 10

// logIDs returns ids for a log line: each cut by logID, at most
// maxLoggedIDs of them and a count of the rest.
func logIDs(ids []string) []string {
	out := make([]string, 0, min(len(ids), maxLoggedIDs+1))
	for i, id := range ids {
		if i == maxLoggedIDs {
			out = append(out, fmt.Sprintf("…and %d more", len(ids)-i))
			break
		}
		out = append(out, logID(id))
	}
	return out
}

// Log sampling of refusals, per receiver: the first logBurst lines of each
// logWindow are written, the rest counted and reported in one line when
// the next window opens. Metrics count every refusal.
const (
	logBurst  = 5
	logWindow = 10 * time.Second
)

// logSampler samples the log lines of a flood of refusals (wrong tokens,
// rate limiting) to one receiver.
type logSampler struct {
	now func() time.Time

	mu         sync.Mutex
	windowEnd  time.Time
	written    int
	suppressed int
}

func newLogSampler(now func() time.Time) *logSampler { return &logSampler{now: now} }

// warn writes msg at Warn level unless this window's lines are spent.
func (s *logSampler) warn(log *slog.Logger, msg string, attrs ...any) {
	s.mu.Lock()
	now := s.now()
	suppressed := 0
	if !now.Before(s.windowEnd) {
		suppressed = s.suppressed
		s.windowEnd, s.written, s.suppressed = now.Add(logWindow), 0, 0
	}
	write := s.written < logBurst
	if write {
		s.written++
	} else {
		s.suppressed++
	}
	s.mu.Unlock()
	if suppressed > 0 {
		log.Warn("webhook refusals not logged one by one (see flotilla_webhooks_total)", slog.Int("suppressed", suppressed), slog.Duration("window", logWindow))
	}
	if write {
		log.Warn(msg, attrs...)
	}
}
