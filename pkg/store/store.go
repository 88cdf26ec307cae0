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
	bucketEvents   = []byte("events")
	bucketEventIDs = []byte("event_ids") // id -> seq; written by older versions only
	// bucketEventIDLog is seq -> id, appended to with every event; loaded
	// into Store.ids at open.
	bucketEventIDLog = []byte("event_id_log")
	bucketCursors    = []byte("cursors")
	bucketDocs       = []byte("docs")
)

// Store is the embedded store. It is safe for concurrent use.
type Store struct {
	db      *bolt.DB
	path    string
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics

	lastSeq atomic.Uint64

	// writeMu serializes write transactions that journal events, so the id
	// index in memory is up to date when each starts.
	writeMu sync.Mutex
	// ids maps every journaled event id to its sequence (see idSet).
	idsMu sync.RWMutex
	ids   map[string]uint64

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
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store %q is in use by another flotilla: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s := &Store{
		db:      db,
		path:    path,
		log:     o.logger,
		now:     o.now,
		changed: make(chan struct{}),
		appends: make(chan *appendReq),
		closing: make(chan struct{}),
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketEventIDs, bucketEventIDLog, bucketCursors, bucketDocs} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("creating bucket %s: %w", name, err)
			}
		}
		s.lastSeq.Store(tx.Bucket(bucketEvents).Sequence())
		ids, err := loadIDs(tx)
		if err != nil {
			return fmt.Errorf("loading event ids: %w", err)
		}
		s.ids = ids
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s.metrics, err = newMetrics(o.registerer, func() float64 {
		n, err := s.Size()
		if err != nil {
			return 0
		}
		return float64(n)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	s.writerWG.Add(1)
	go s.writer()
	s.log.Debug("store opened", "path", path, "last_seq", s.lastSeq.Load())
	return s, nil
}

// Close waits for the commit in progress, fails appends still waiting with
// [ErrClosed], unregisters the metrics and closes the file. Calling it again
// returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.writerWG.Wait()
		s.metrics.unregister()
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("closing store %q: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Size returns the size of the store file in bytes.
func (s *Store) Size() (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("sizing store: %w", err)
	}
	return fi.Size(), nil
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func keySeq(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
