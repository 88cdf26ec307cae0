package store_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// FuzzJournalRoundTrip appends an event built from arbitrary parts (id,
// source, type, a time from unix seconds and nanoseconds that covers absurd
// years, an extension, data and its content type): either Append refuses it
// with a permanent error, or Read returns exactly that event. An event the
// journal keeps but cannot read back would stop its readers at every start.
func FuzzJournalRoundTrip(f *testing.F) {
	zero := time.Time{}
	for _, tm := range []time.Time{
		time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC),
		zero,
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(287396, 10, 12, 8, 59, 0, 993000000, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("west", -2*3600)), // year 10000 in UTC
	} {
		f.Add("id-1", "/hooks/registry", "dev.flotilla.image.pushed.v1", tm.Unix(), int64(tm.Nanosecond()), "rolloutid", "r-1", "application/json", []byte(`{"tag":"1.2.3"}`))
	}
	f.Add("id-2", "/x", "t", int64(math.MaxInt64), int64(math.MaxInt64), "", "", "", []byte(nil))
	f.Add("id-3", "/x", "t", int64(math.MinInt64), int64(-1), "", "", "", []byte(nil))
	f.Add("id-4", "/x", "t", int64(-62135596800), int64(0), "", "", "text/plain", []byte("hello"))
	f.Add("id-5", "/x", "t", int64(0), int64(0), "", "", "application/json", []byte("not json"))
	f.Add("id-6", "/x", "t", int64(0), int64(0), "", "", "application/json", []byte("{}\n"))
	f.Add("\xff", "/x", "t", int64(0), int64(0), "ext", "\xfe", "text/plain", []byte("\xfd"))
	f.Add("id-7", "%zz", "t", int64(0), int64(0), "data", "x", "application/octet-stream", []byte{0, 1, 2})

	var s *store.Store
	base := f.TempDir()
	f.Cleanup(func() {
		if s != nil {
			_ = s.Close()
		}
	})
	f.Fuzz(func(t *testing.T, id, source, typ string, sec, nsec int64, extName, extValue, contentType string, data []byte) {
		e := cloudevents.NewEvent()
		e.SetID(id)
		e.SetSource(source)
		e.SetType(typ)
		e.SetTime(time.Unix(sec, nsec))
		if extName != "" {
			e.SetExtension(extName, extValue) // an invalid one fails Validate
		}
		if len(data) > 0 || contentType != "" {
			// As a binary-mode HTTP request carries it: the bytes as they are.
			e.SetDataContentType(contentType)
			e.DataEncoded = data
		}

		// One store per worker; a new one when the id is already in it.
		if s == nil || has(t, s, e.ID()) { // SetID trims blanks
			if s != nil {
				_ = s.Close()
			}
			dir, err := os.MkdirTemp(base, "store-")
			if err != nil {
				t.Fatal(err)
			}
			if s, err = store.Open(filepath.Join(dir, "flotilla.db"), store.WithCommitDelay(0)); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := s.Append(t.Context(), e)
		if err != nil {
			if !fault.IsPermanent(err) {
				t.Fatalf("Append = %v: not permanent", err)
			}
			return
		}
		if len(recs) != 1 {
			t.Fatalf("Append added %d records, want 1", len(recs))
		}
		got, err := s.Read(t.Context(), recs[0].Seq-1, 1)
		if err != nil {
			t.Fatalf("Read of an appended event: %v", err)
		}
		if len(got) != 1 || got[0].Err != nil {
			t.Fatalf("Read of an appended event = %+v", got)
		}
		if diff := cmp.Diff(viewOf(t, e), viewOf(t, got[0].Event)); diff != "" {
			t.Errorf("the event read back differs (-appended +read):\n%s", diff)
		}
	})
}

func has(t *testing.T, s *store.Store, id string) bool {
	t.Helper()
	ok, err := s.Has(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// eventView is what an event says, to compare one read back with the one
// appended, byte for byte.
type eventView struct {
	ID, Source, Type, Subject, DataContentType, DataSchema string
	Time                                                   time.Time
	Extensions                                             map[string]string
	Data                                                   []byte
}

func viewOf(t *testing.T, e cloudevents.Event) eventView {
	t.Helper()
	v := eventView{
		ID: e.ID(), Source: e.Source(), Type: e.Type(), Subject: e.Subject(),
		DataContentType: e.DataContentType(), DataSchema: e.DataSchema(), Time: e.Time(),
		Extensions: map[string]string{}, Data: e.Data(),
	}
	for name, ext := range e.Extensions() {
		s, err := types.Format(ext)
		if err != nil {
			t.Fatalf("extension %q: %v", name, err)
		}
		v.Extensions[name] = s
	}
	// JSON data goes into the event's JSON as it is: only the blanks
	// around it may be lost.
	var compact bytes.Buffer
	if json.Compact(&compact, v.Data) == nil {
		v.Data = compact.Bytes()
	}
	return v
}
