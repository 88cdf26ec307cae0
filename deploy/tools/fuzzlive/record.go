package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// record is one line of the failure log: a request flotilla answered with a
// 5xx or not at all, or one it accepted shortly before it died. `-replay`
// posts the requests of such a log again, signed anew.
type record struct {
	At     time.Time `json:"at"`
	Seed   int64     `json:"seed"`
	Worker int       `json:"worker"`
	Seq    int       `json:"seq"` // the worker's request number
	// Why the request is in the log; Crash is the crash (1, 2, ...) it is
	// a suspect or victim of.
	Why      string        `json:"why"`
	Crash    int           `json:"crash,omitempty"`
	Status   int           `json:"status,omitempty"`
	Error    string        `json:"error,omitempty"`
	Response string        `json:"response,omitempty"`
	Took     time.Duration `json:"took,omitempty"`
	Request  *request      `json:"request"`
}

// Why a request is in the failure log.
const (
	whyFailed      = "failed" // 5xx or no answer
	whyBusy        = "busy"   // a documented 503
	whyBeforeCrash = "accepted before flotilla died"
	whyOrphan      = "no answer: flotilla had died"
	whySlow        = "slow" // answered, after slowRequest or more
)

// failureLog appends records to a JSON-lines file.
type failureLog struct {
	path string

	mu sync.Mutex
	f  *os.File
	n  int
}

func openFailureLog(path string) (*failureLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &failureLog{path: path, f: f}, nil
}

func (l *failureLog) add(rec record) {
	b, err := json.Marshal(rec)
	if err != nil {
		logf("cannot log a request: %v", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		logf("writing %s: %v", l.path, err)
	}
	l.n++
}

func (l *failureLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *failureLog) close() error { return l.f.Close() }

// readRecords reads a failure log.
func readRecords(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		if rec.Request == nil {
			return nil, fmt.Errorf("%s line %d: no request", path, line)
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

// recent keeps the last requests flotilla accepted (2xx), and those in
// flight when it died: when it dies of something it journaled, the culprit
// is among them, though it was answered 202.
type recent struct {
	mu   sync.Mutex
	ring []record
	next int
	full bool
}

func newRecent(n int) *recent { return &recent{ring: make([]record, n)} }

func (r *recent) add(rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = rec
	r.next = (r.next + 1) % len(r.ring)
	if r.next == 0 {
		r.full = true
	}
}

// drain returns the kept records, oldest first, and forgets them.
func (r *recent) drain() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]record(nil), r.ring[:r.next]...)
	if r.full {
		out = append(append([]record(nil), r.ring[r.next:]...), out...)
	}
	clear(r.ring)
	r.next, r.full = 0, false
	return out
}
