package store_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// withTime is event id with time tm.
func withTime(t *testing.T, id string, tm time.Time) cloudevents.Event {
	t.Helper()
	e := event(t, id)
	e.SetTime(tm)
	return e
}

// withRawData is event id carrying data as a binary-mode request does: the
// bytes as they are, under contentType.
func withRawData(t *testing.T, id, contentType string, data []byte) cloudevents.Event {
	t.Helper()
	e := event(t, id)
	e.SetDataContentType(contentType)
	e.DataEncoded, e.DataBase64 = data, false
	return e
}

// Every event the journal keeps must read back: one it cannot decode
// would stop its readers at every start. Append refuses such an event with a
// permanent error (the sender must not retry it) naming it and why, and
// writes nothing of the call.
func TestAppendRefusesEventsThatDoNotReadBack(t *testing.T) {
	tests := []struct {
		name string
		bad  func(t *testing.T) cloudevents.Event
		want []string
	}{
		{
			name: "year 287396",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withTime(t, "bad", time.Date(287396, 10, 12, 8, 59, 0, 993000000, time.UTC))
			},
			want: []string{`(id "bad")`, "287396-10-12T08:59:00.993Z"},
		},
		{
			name: "year 10000",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withTime(t, "bad", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
			},
			want: []string{`(id "bad")`, "10000-01-01"},
		},
		{
			name: "year 10000 in UTC only",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withTime(t, "bad", time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("west", -2*3600)))
			},
			want: []string{`(id "bad")`, "10000-01-01T01:00:00Z"},
		},
		{
			name: "a negative year",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withTime(t, "bad", time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC))
			},
			want: []string{`(id "bad")`},
		},
		{
			name: "a long id is cut in the message",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withTime(t, strings.Repeat("y", 1000), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
			},
			want: []string{`(id "` + strings.Repeat("y", 64) + `...")`},
		},
		{
			name: "JSON data that is not JSON",
			bad: func(t *testing.T) cloudevents.Event {
				t.Helper()
				return withRawData(t, "bad", cloudevents.ApplicationJSON, []byte("not json"))
			},
			want: []string{`(id "bad")`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			_, err := s.Append(t.Context(), event(t, "ok-1"), tt.bad(t))
			if err == nil {
				t.Fatal("Append succeeded")
			}
			if !fault.IsPermanent(err) {
				t.Errorf("error %q is not permanent: the sender would retry it for ever", err)
			}
			for _, w := range append([]string{"event 1 ", "would not read back"}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n := len(readAll(t, s)); n != 0 || s.LastSeq() != 0 {
				t.Errorf("the journal has %d records; want nothing of the call written", n)
			}
		})
	}
}

// Events at the edges of what reads back are kept, and read back as they
// were.
func TestAppendKeepsEventsThatReadBack(t *testing.T) {
	tests := []struct {
		name string
		e    func(t *testing.T) cloudevents.Event
	}{
		{"year 9999", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withTime(t, "e", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC))
		}},
		{"year 1", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withTime(t, "e", time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC))
		}},
		{"no time", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withTime(t, "e", time.Time{})
		}},
		{"an offset", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withTime(t, "e", time.Date(2025, 1, 1, 0, 30, 0, 0, time.FixedZone("east", 3600)))
		}},
		{"JSON data with a trailing newline", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withRawData(t, "e", cloudevents.ApplicationJSON, []byte("{\"a\": 1}\n"))
		}},
		{"text data that is not UTF-8", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return withRawData(t, "e", "text/plain", []byte("caf\xe9"))
		}},
		{"an id that is not UTF-8", func(t *testing.T) cloudevents.Event {
			t.Helper()
			return event(t, "e-\xff")
		}},
		{"binary data", func(t *testing.T) cloudevents.Event {
			t.Helper()
			e := event(t, "e")
			if err := e.SetData("application/octet-stream", []byte{0, 0xff, 0xfe}); err != nil {
				t.Fatal(err)
			}
			return e
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			want := tt.e(t)
			if _, err := s.Append(t.Context(), want); err != nil {
				t.Fatalf("Append: %v", err)
			}
			recs := readAll(t, s)
			if len(recs) != 1 || recs[0].Err != nil {
				t.Fatalf("Read = %+v", recs)
			}
			got := recs[0].Event
			if !got.Time().Equal(want.Time()) || got.ID() != want.ID() {
				t.Errorf("read back %s at %v, want %s at %v", got.ID(), got.Time(), want.ID(), want.Time())
			}
			if diff := cmp.Diff(strings.TrimSpace(string(want.Data())), string(got.Data())); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
}

// An event in the outbox that does not read back (put there by a version
// that let such events in) is dropped with an error in the log, rather
// than failing every start; the others are journaled.
func TestOpenDropsAnOutboxEventThatDoesNotReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := json.Marshal(event(t, "pending"))
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(`{"specversion":"1.0","id":"bad","source":"/x","type":"t","time":"287396-10-12T08:59:00.993Z"}`)
	err = db.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket([]byte("outbox"))
		return errors.Join(
			out.Put(binary.BigEndian.AppendUint64(nil, 1), bad),
			out.Put(binary.BigEndian.AppendUint64(nil, 2), good))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	s = openAt(t, path, store.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if diff := cmp.Diff([]string{"pending"}, idsOf(readAll(t, s))); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "does not read back") {
		t.Errorf("no error logged for the dropped event:\n%s", logs.String())
	}
}
