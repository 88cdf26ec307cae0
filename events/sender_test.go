package events

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// received is the fixed receive time of test deliveries.
var received = time.Date(2026, 1, 2, 15, 4, 30, 0, time.UTC)

func fixture(tb testing.TB, sender, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", sender, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// seedFixtures adds every fixture of sender to the fuzz corpus.
func seedFixtures(f *testing.F, sender string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", sender, "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no fixtures for %s: %v", sender, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// payloads decodes the payload of every event.
func payloads[T any](t *testing.T, evs []cloudevents.Event) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is not valid: %v", e.ID(), err)
		}
		p, err := Decode[T](e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// checkFuzzResult asserts what every Parse must guarantee, whatever its input.
func checkFuzzResult(t *testing.T, res Result, err error) {
	t.Helper()
	if err != nil {
		if !IsPermanent(err) {
			t.Fatalf("Parse error is not permanent: %v", err)
		}
		return
	}
	if len(res.Events) == 0 && res.Ignored == "" && res.Gate == nil {
		t.Fatal("Parse returned neither events, a gate call nor a reason to ignore")
	}
	for _, e := range res.Events {
		if err := e.Validate(); err != nil {
			t.Fatalf("event %q is not valid: %v", e.ID(), err)
		}
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestNewSender(t *testing.T) {
	// Every receiver type of the config is a sender type.
	want := slices.Clone(config.ReceiverTypes)
	slices.Sort(want)
	if diff := cmp.Diff(want, SenderTypes()); diff != "" {
		t.Errorf("SenderTypes() (-config.ReceiverTypes +got):\n%s", diff)
	}
	for _, typ := range SenderTypes() {
		s, err := NewSender(ReceiverConfig{Name: "r", Type: typ, Insecure: true, Registry: "nexus.example.com:8082"})
		if err != nil || s == nil {
			t.Errorf("NewSender(%q) = %v, %v", typ, s, err)
		}
	}
	if _, err := NewSender(ReceiverConfig{Name: "r", Type: "no-such-sender", Secret: "s"}); err == nil {
		t.Error("NewSender(unknown) succeeded")
	}
}

// checkAuth runs one Authenticate case.
func checkAuth(t *testing.T, s Sender, d *Delivery, wantOK bool) {
	t.Helper()
	err := s.Authenticate(t.Context(), d)
	switch {
	case wantOK && err != nil:
		t.Fatalf("Authenticate: %v", err)
	case !wantOK && err == nil:
		t.Fatal("Authenticate succeeded, want failure")
	case !wantOK && (!errors.Is(err, ErrUnauthenticated) || !IsPermanent(err)):
		t.Fatalf("Authenticate error %v is not a permanent ErrUnauthenticated", err)
	}
}
