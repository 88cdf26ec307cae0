package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"

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
		// The same deliveries with times no CloudEvent can carry.
		if timeFields.Match(b) {
			for _, v := range extremeTimes {
				f.Add(timeFields.ReplaceAll(b, []byte("${1}"+v)))
			}
		}
	}
}

// timeFields matches the time fields of the senders' payloads, for seeding
// the fuzz targets with times outside years 1-9999.
var timeFields = regexp.MustCompile(`("(?:timestamp|time|occur_at|pushed_at|updated_at|publishTime|publish_time|date|createdDate)"\s*:\s*)("[^"]*"|-?[0-9.eE+]+)`)

var extremeTimes = []string{`"0000-01-01T00:00:00+01:00"`, `"9999-12-31T23:59:59-01:00"`, `"287396-10-12T08:59:00.993Z"`, `9007199254740993`, `"9007199254740993"`, `-62135596801`}

// payloads decodes the payload of every event.
func payloads[T any](t *testing.T, evs []cloudevents.Event) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is not valid: %v", e.ID(), err)
		}
		p, err := events.Decode[T](e)
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
		if !fault.IsPermanent(err) {
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
		checkReadsBack(t, e)
	}
}

// checkReadsBack asserts that e survives the journal's encoding: what is
// accepted must read back (an event time outside years 1-9999 once could
// not, and stopped the engine for good).
func checkReadsBack(t *testing.T, e cloudevents.Event) {
	t.Helper()
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("event %q does not encode: %v", e.ID(), err)
	}
	var back cloudevents.Event
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("event %q does not read back: %v\n%s", e.ID(), err, raw)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("event %q reads back invalid: %v", e.ID(), err)
	}
	if !back.Time().Equal(e.Time()) || back.ID() != e.ID() || !bytes.Equal(back.Data(), e.Data()) {
		t.Fatalf("event %q reads back changed:\n%s\nas %+v", e.ID(), raw, back)
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
	case !wantOK && (!errors.Is(err, ErrUnauthenticated) || !fault.IsPermanent(err)):
		t.Fatalf("Authenticate error %v is not a permanent ErrUnauthenticated", err)
	}
	checkHeadAuth(t, s, d, err)
}

// checkHeadAuth checks that AuthenticateHead, which the intake calls before
// reading the body, agrees with Authenticate (whose error was err): it
// accepts only what Authenticate accepts, refuses only what it refuses, and
// never reads the body.
func checkHeadAuth(t *testing.T, s Sender, d *Delivery, err error) {
	t.Helper()
	ha, ok := s.(HeadAuthenticator)
	if !ok {
		return
	}
	head := *d
	head.Body = nil
	switch herr := ha.AuthenticateHead(t.Context(), &head); {
	case herr == nil && err != nil:
		t.Fatalf("AuthenticateHead accepts what Authenticate refuses (%v)", err)
	case errors.Is(herr, ErrNeedBody):
	case herr != nil && err == nil:
		t.Fatalf("AuthenticateHead refuses what Authenticate accepts: %v", herr)
	case herr != nil && (!errors.Is(herr, ErrUnauthenticated) || !fault.IsPermanent(herr)):
		t.Fatalf("AuthenticateHead error %v is not a permanent ErrUnauthenticated", herr)
	}
}

// errAny stands for "any permanent error" in table tests.
var errAny = errors.New("any permanent error")

// checkParseErr checks err against want and tells whether the case is done.
func checkParseErr(t *testing.T, err, want error) bool {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("Parse: %v", err)
	case want == nil:
		return false
	case err == nil:
		t.Fatal("Parse succeeded, want an error")
	case !fault.IsPermanent(err):
		t.Fatalf("Parse error %v is not permanent", err)
	case !errors.Is(want, errAny) && !errors.Is(err, want):
		t.Fatalf("Parse error %v, want %v", err, want)
	}
	return true
}

// checkImageEvents checks the events of an image-pushed Result: payloads,
// ids (unless wantIDs is nil), times, type and source.
func checkImageEvents(t *testing.T, res Result, receiver string, want []events.ImagePushed, wantIDs []string, wantTimes []time.Time) {
	t.Helper()
	if diff := cmp.Diff(want, payloads[events.ImagePushed](t, res.Events)); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	var ids []string
	var times []time.Time
	for _, e := range res.Events {
		ids = append(ids, e.ID())
		times = append(times, e.Time())
		if e.Type() != events.TypeImagePushed || e.Source() != "/hooks/"+receiver {
			t.Errorf("event %s: type %q source %q", e.ID(), e.Type(), e.Source())
		}
	}
	if wantIDs != nil {
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff(wantTimes, times); diff != "" {
		t.Errorf("times (-want +got):\n%s", diff)
	}
}

// imageParseCase is one case of an image sender's Parse table test.
type imageParseCase struct {
	name        string
	d           *Delivery // the whole delivery; nil: deliver(body) with contentType
	file        string    // testdata/<sender>/file, instead of body
	body        []byte
	contentType string // "" keeps deliver's, "-" leaves it out
	want        []events.ImagePushed
	wantIDs     []string    // nil: not checked (a case without pushes has no events)
	wantTimes   []time.Time // nil: every event at the time of receipt
	wantIgnored string
	wantDeliv   string
	wantErr     error // nil: no error; else errors.Is target, or errAny
}

// runImageParseCases runs the cases of an image sender's Parse with its
// fixtures in testdata/<sender>: the error, the events, Ignored and
// DeliveryID.
func runImageParseCases(t *testing.T, sender string, parse func(*Delivery) (Result, error), deliver func(body []byte) *Delivery, cases []imageParseCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.d
			if d == nil {
				body := tt.body
				if tt.file != "" {
					body = fixture(t, sender, tt.file)
				}
				d = deliver(body)
				switch tt.contentType {
				case "":
				case "-":
					d.Header.Del("Content-Type")
				default:
					d.Header.Set("Content-Type", tt.contentType)
				}
			}
			res, err := parse(d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			wantTimes := tt.wantTimes
			if wantTimes == nil {
				for range res.Events {
					wantTimes = append(wantTimes, d.ReceivedAt)
				}
			}
			checkImageEvents(t, res, d.Receiver, tt.want, tt.wantIDs, wantTimes)
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			if res.DeliveryID != tt.wantDeliv {
				t.Errorf("DeliveryID = %q, want %q", res.DeliveryID, tt.wantDeliv)
			}
		})
	}
}

// gitParseCase is one case of a git sender's Parse table test.
type gitParseCase struct {
	name        string
	s           Sender // nil: the table's
	d           *Delivery
	want        []events.GitPushed
	wantID      string    // every event's id; "": eventID's
	wantKey     string    // for eventID: the delivery key in the ids, if not the table's
	wantTime    time.Time // zero: the time of receipt
	wantIgnored string
	wantErr     error // nil: no error; else errors.Is target, or errAny
}

// runGitParseCases runs the cases of a git sender's Parse: the error, the
// payloads, each event's id (wantID, else eventID of the case and the
// event's push), type, source and time, Ignored, and DeliveryID: that of
// the first push, or deliveryID when there is none.
func runGitParseCases(t *testing.T, parse func(*Delivery) (Result, error), deliveryID string, eventID func(tt gitParseCase, p events.GitPushed) string, cases []gitParseCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			parse := parse
			if tt.s != nil {
				parse = tt.s.Parse
			}
			res, err := parse(tt.d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			got := payloads[events.GitPushed](t, res.Events)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			wantTime := tt.wantTime
			if wantTime.IsZero() {
				wantTime = tt.d.ReceivedAt
			}
			for i, e := range res.Events {
				wantID := tt.wantID
				if wantID == "" {
					wantID = eventID(tt, got[i])
				}
				if e.ID() != wantID || e.Type() != events.TypeGitPushed || e.Source() != "/hooks/"+tt.d.Receiver || !e.Time().Equal(wantTime) {
					t.Errorf("event id %q type %q source %q time %v", e.ID(), e.Type(), e.Source(), e.Time())
				}
			}
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			wantDeliv := deliveryID
			if len(tt.want) > 0 {
				wantDeliv = tt.want[0].DeliveryID
			}
			if res.DeliveryID != wantDeliv {
				t.Errorf("DeliveryID = %q, want %q", res.DeliveryID, wantDeliv)
			}
		})
	}
}
