package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

const (
	// readWindow is how much of a segment the scans at open and repair hold
	// in memory at a time: they stream the file rather than read it whole
	// (a segment is 64 MiB by default).
	readWindow = 1 << 20
	// minRecord is the size of the smallest record (headers only). A
	// damaged stretch of n bytes cannot have held more than n/minRecord
	// records, which bounds the seq a record after it may carry.
	minRecord = recordHeader + bodyHeader
)

// segmentReader reads a segment file through a window of memory that
// slides along as a scan goes. It grows only for a record larger than the
// window, and only when the caller asks for the record's bytes.
type segmentReader struct {
	f    *os.File
	path string
	size int64  // of the file
	buf  []byte // the window
	off  int64  // file offset of buf[0]
}

func newSegmentReader(f *os.File, path string) (*segmentReader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading journal segment %s: %w", path, err)
	}
	return &segmentReader{f: f, path: path, size: fi.Size(), buf: make([]byte, 0, readWindow)}, nil
}

// at returns the n bytes at off, which must lie within the file. They are
// valid until the next call.
func (r *segmentReader) at(off int64, n int) ([]byte, error) {
	if off >= r.off && off+int64(n) <= r.off+int64(len(r.buf)) {
		return r.buf[off-r.off : off-r.off+int64(n)], nil
	}
	if off < 0 || int64(n) > r.size-off {
		return nil, fmt.Errorf("reading journal segment %s: %d bytes at %d: %w", r.path, n, off, io.ErrUnexpectedEOF)
	}
	if n > cap(r.buf) {
		r.buf = make([]byte, 0, n)
	}
	m := int(min(int64(cap(r.buf)), r.size-off))
	r.buf = r.buf[:m]
	r.off = off
	if k, err := r.f.ReadAt(r.buf, off); k < m {
		r.buf = r.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading journal segment %s: %w", r.path, err)
	}
	return r.buf[:n], nil
}

// recordInfo describes an intact record found by a scan.
type recordInfo struct {
	seq   uint64
	idLen int
	size  int64 // headers and body
}

// record reads the record at off and reports whether it is whole, intact
// (its CRC matches) and numbered within [lo, hi]. The CRC is computed
// through the window, so a record larger than it costs no memory.
func (r *segmentReader) record(off int64, lo, hi uint64) (recordInfo, bool, error) {
	if r.size-off < minRecord {
		return recordInfo{}, false, nil
	}
	hdr, err := r.at(off, minRecord)
	if err != nil {
		return recordInfo{}, false, err
	}
	n := int64(binary.LittleEndian.Uint32(hdr))
	sum := binary.LittleEndian.Uint32(hdr[4:])
	rec := recordInfo{
		seq:   binary.LittleEndian.Uint64(hdr[recordHeader:]),
		idLen: int(binary.LittleEndian.Uint16(hdr[recordHeader+8:])),
		size:  recordHeader + n,
	}
	if n < bodyHeader || n > r.size-off-recordHeader || rec.seq < lo || rec.seq > hi || int64(rec.idLen) > n-bodyHeader {
		return recordInfo{}, false, nil
	}
	var crc uint32
	for pos, end := off+recordHeader, off+rec.size; pos < end; {
		c := min(end-pos, readWindow)
		b, err := r.at(pos, int(c))
		if err != nil {
			return recordInfo{}, false, err
		}
		crc = crc32.Update(crc, crcTable, b)
		pos += c
	}
	return rec, crc == sum, nil
}

// id returns the event id of rec, the record at off.
func (r *segmentReader) id(off int64, rec recordInfo) (string, error) {
	b, err := r.at(off+minRecord, rec.idLen)
	return string(b), err
}

// event returns the CloudEvents JSON of rec, the record at off. The bytes
// are valid until the next call.
func (r *segmentReader) event(off int64, rec recordInfo) ([]byte, error) {
	start := off + minRecord + int64(rec.idLen)
	return r.at(start, int(off+rec.size-start))
}

// findRecord scans the bytes from off on, where the record numbered next
// should have been and is not, for an intact record that may follow it: one
// numbered next or later (and no later than the damaged stretch before it
// leaves room for). It reports where it found one, or, if there is none,
// the offset of the last non-zero byte from off on (off-1 if all are zero).
func (r *segmentReader) findRecord(off int64, next uint64) (at int64, rec recordInfo, found bool, lastNonZero int64, err error) {
	lastNonZero = off - 1
	for p := off; p < r.size; {
		w, err := r.at(p, int(min(readWindow, r.size-p)))
		if err != nil {
			return 0, recordInfo{}, false, 0, err
		}
		i, candidate := 0, false
		for ; i < len(w); i++ {
			pos := p + int64(i)
			if i+minRecord > len(w) && pos+minRecord <= r.size {
				break // the header runs past the window: slide it
			}
			if w[i] != 0 {
				lastNonZero = pos
			}
			if pos == off || i+minRecord > len(w) {
				continue
			}
			n := int64(binary.LittleEndian.Uint32(w[i:]))
			if n < bodyHeader || n > r.size-pos-recordHeader {
				continue
			}
			seq := binary.LittleEndian.Uint64(w[i+recordHeader:])
			if seq < next || seq-next > uint64((pos-off)/minRecord) {
				continue
			}
			candidate = true
			break
		}
		if !candidate {
			p += int64(i)
			continue
		}
		pos := p + int64(i)
		seq := binary.LittleEndian.Uint64(w[i+recordHeader:])
		rec, ok, err := r.record(pos, seq, seq) // moves the window
		if err != nil {
			return 0, recordInfo{}, false, 0, err
		}
		if ok {
			return pos, rec, true, lastNonZero, nil
		}
		p = pos + 1
	}
	return 0, recordInfo{}, false, lastNonZero, nil
}
