package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("store is closed")

var (
	bucketCursors = []byte("cursors")
	bucketDocs    = []byte("docs")
	// bucketOutbox holds the events of UpdateAndAppend calls from the commit
	// of their document until the journal has them: seq -> event JSON.
	bucketOutbox = []byte("outbox")
	// bucketMeta holds facts about the journal: journal_start, the seq of
	// its first record once retention has deleted any (big-endian).
	bucketMeta      = []byte("meta")
	keyJournalStart = []byte("journal_start")

	// Written by older versions, which kept the journal in the bbolt file:
	// events and event_id_log are moved into the event log at open, and
	// event_ids (id -> seq), their dedupe index, is dropped.
	bucketEvents     = []byte("events")
	bucketEventIDLog = []byte("event_id_log")
	bucketEventIDs   = []byte("event_ids")
)

// Store is the embedded store. It is safe for concurrent use.
type Store struct {
	db          *bolt.DB
	path        string
	journal     *eventLog
	logger      *slog.Logger
	now         func() time.Time
	metrics     *metrics
	commitDelay time.Duration

	// ids is the dedupe index (ids.go): the writer adds to it, Compact
	// forgets old generations, both under idsMu.
	idsMu sync.RWMutex
	ids   idIndex
	// The writer's scratch space.
	pending map[idKey]struct{}
	keys    []idKey
	recs    []logRecord
	// bounds are retention and the dedupe window (compact.go).
	bounds    bounds
	clock     func() time.Time // of bounds
	compactMu sync.Mutex
	// broken is why the writer stopped (see Err); nil while it works.
	broken atomic.Pointer[error]

	// outboxMu orders UpdateAndAppend calls: their events reach the writer
	// in the order their documents committed. delivered lists outbox keys
	// whose events are journaled, to delete in the next transaction.
	timers timerState

	outboxMu  sync.Mutex
	delivered [][]byte

	changedMu sync.Mutex
	changed   chan struct{}

	appends   chan *appendReq // unbuffered: blocked senders are the queue
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	writerWG  sync.WaitGroup
}

// Open opens the store at path, creating the file and its parent directory if
// needed. If another process holds the file, Open fails after the lock timeout
// (see [WithLockTimeout]) with an error saying the store is in use.
func Open(path string, opts ...Option) (*Store, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("opening store %q: creating directory: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      o.lockTimeout,
		FreelistType: bolt.FreelistMapType,
		// As etcd does: the freelist is rebuilt at open instead of written
		// at every commit, one page write less per commit.
		NoFreelistSync: true,
		NoSync:         o.noSync,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store %q is in use by another flotilla: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s := &Store{
		db:          db,
		path:        path,
		logger:      o.logger,
		now:         o.now,
		commitDelay: o.commitDelay,
		pending:     map[idKey]struct{}{},
		bounds:      bounds{retention: o.retention, window: o.dedupe, maxIDs: o.dedupeMax, every: min(o.compactEach, o.rollAfter())},
		clock:       o.clock,
		changed:     make(chan struct{}),
		appends:     make(chan *appendReq),
		closing:     make(chan struct{}),
	}
	if err := s.open(o); err != nil {
		_ = db.Close()
		if s.journal != nil {
			_ = s.journal.close()
		}
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s.metrics, err = newMetrics(o.registerer, s.gauges())
	if err != nil {
		_ = db.Close()
		_ = s.journal.close()
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s.writerWG.Add(2)
	go s.writer()
	go s.compactor()
	if err := s.replayOutbox(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s.logger.Debug("store opened", "path", path, "last_seq", s.LastSeq())
	return s, nil
}

// JournalDir returns the directory of the event log of the store at path.
func JournalDir(path string) string { return path + ".journal" }

// open creates the buckets, opens the event log (finishing a compaction a
// crash cut short), moves an older version's journal into it and loads the
// id index.
func (s *Store) open(o options) error {
	var start uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketCursors, bucketDocs, bucketOutbox, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("creating bucket %s: %w", name, err)
			}
		}
		start = journalStart(tx)
		return nil
	})
	if err != nil {
		return err
	}
	dir := JournalDir(s.path)
	if dirExists(dir) {
		if err := removeBefore(dir, start); err != nil {
			return err
		}
	}
	cutoff := s.clock().Add(-s.bounds.window)
	s.journal, err = openLog(dir, o.segmentSize, s.logger, func(seg *segment, _ uint64, id string) {
		if seg.written.Before(cutoff) {
			return // outside the dedupe window
		}
		if len(s.ids.gens) == 0 || s.ids.gens[len(s.ids.gens)-1].first != seg.first {
			s.ids.evict(cutoff, s.bounds.maxIDs)
		}
		s.ids.add(seg.first, seg.written, keyOf(id))
	})
	if err != nil {
		return err
	}
	s.journal.now = s.clock
	s.journal.rollAfter = o.rollAfter()
	s.journal.noSync = o.noSync
	if want, first := max(start, 1), s.journal.first(); len(s.journal.segments()) > 0 && first != want {
		return fmt.Errorf("%w: the journal starts at record %d, not at %d: segments are missing; %s",
			errCorrupt, first, want, repairHint(dir))
	}
	if err := s.migrateJournal(); err != nil {
		return err
	}
	if err := s.checkCursors(); err != nil {
		return err
	}
	return nil
}

// journalStart returns the seq of the journal's first record as retention
// left it, 0 if retention never deleted any.
func journalStart(tx *bolt.Tx) uint64 {
	if b := tx.Bucket(bucketMeta); b != nil {
		if v := b.Get(keyJournalStart); len(v) == 8 {
			return keySeq(v)
		}
	}
	return 0
}

// checkCursors refuses a journal that ends below a consumer's cursor: records
// it had were lost, and their sequence numbers would be handed out again to
// new events, which that consumer would then skip.
func (s *Store) checkCursors() error {
	last := s.journal.lastSeq()
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			if len(v) != 8 || keySeq(v) <= last {
				return nil
			}
			return fmt.Errorf("%w: the journal ends at record %d, below consumer %q's cursor %d: records were lost, and their sequence numbers must not be handed out again; %s",
				errCorrupt, last, k, keySeq(v), repairHint(s.journal.dir))
		})
	})
}

// Close waits for the commit in progress, fails appends still waiting with
// [ErrClosed], unregisters the metrics and closes the file. Calling it again
// returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.writerWG.Wait()
		s.metrics.unregister()
		err := s.clearOutbox()
		err = errors.Join(err, s.db.Close(), s.journal.close())
		if err != nil {
			s.closeErr = fmt.Errorf("closing store %q: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Size returns the size of the store on disk in bytes: the state file and
// the journal's records.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("sizing store: %w", err)
	}
	return fi.Size() + s.journal.size(), nil
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func keySeq(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
