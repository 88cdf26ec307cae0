package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// MaxIDLen bounds an event id: the embedded journal stores its length in
// 16 bits, and every adapter keeps the same limit.
const MaxIDLen = 32 << 10

// Encode validates and encodes events for a bus (the CloudEvents JSON
// format, structured mode), one encoding for every adapter. Every event
// must read back as it was given: one that the journal stored but could not
// decode (a time beyond year 9999, data that is not the JSON its content
// type says) would stop its readers at every start. A refusal is permanent
// (bad input that retrying cannot fix; the intake answers 400), and the
// whole call fails, so nothing is written.
func Encode(evs []cloudevents.Event) ([][]byte, error) {
	raw := make([][]byte, len(evs))
	for i, e := range evs {
		id := e.ID()
		if len(id) > MaxIDLen {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q): id is longer than the limit of %d bytes (%d)", i, ShortID(id), MaxIDLen, len(id)))
		}
		if err := e.Validate(); err != nil {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q): %w", i, ShortID(id), err))
		}
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("encoding event %d (id %q): %w", i, ShortID(id), err))
		}
		if err := readsBack(e, b); err != nil {
			return nil, fault.Permanent(fmt.Errorf("event %d (id %q) would not read back from the bus: %w", i, ShortID(id), err))
		}
		raw[i] = b
	}
	return raw, nil
}

// ShortID is id cut to a length fit for an error message.
func ShortID(id string) string {
	const n = 64
	if len(id) <= n {
		return id
	}
	return id[:n] + "..."
}

// Decode decodes an event as Encode wrote it, the one decoding
// that both Append's check and Read use, so that what one accepts the other
// reads. It decodes the JSON once, with the SDK's decoder (json.Unmarshal
// would scan it twice more before calling it).
func Decode(raw []byte) (cloudevents.Event, error) {
	var e cloudevents.Event
	if err := e.UnmarshalJSON(raw); err != nil {
		return cloudevents.Event{}, fmt.Errorf("decoding: %w", err)
	}
	return e, nil
}

// readsBack checks that raw, the encoding of e (a valid event), decodes to
// e: the same attributes, time, extensions and data; so it is valid too.
func readsBack(e cloudevents.Event, raw []byte) error {
	d, err := Decode(raw)
	if err != nil {
		return err
	}
	if d.Context == nil {
		return errors.New("it reads back without attributes")
	}
	for _, a := range [...]struct{ name, want, got string }{
		{"id", e.ID(), d.ID()},
		{"source", e.Source(), d.Source()},
		{"type", e.Type(), d.Type()},
		{"specversion", e.SpecVersion(), d.SpecVersion()},
		{"subject", e.Subject(), d.Subject()},
		{"datacontenttype", e.DataContentType(), d.DataContentType()},
		{"dataschema", e.DataSchema(), d.DataSchema()},
	} {
		if a.want != a.got {
			return fmt.Errorf("its %s %q reads back as %q", a.name, ShortID(a.want), ShortID(a.got))
		}
	}
	if !e.Time().Equal(d.Time()) {
		return fmt.Errorf("its time %s reads back as %s", e.Time().UTC().Format(time.RFC3339Nano), d.Time().UTC().Format(time.RFC3339Nano))
	}
	if err := sameExtensions(extensionsOf(e), extensionsOf(d)); err != nil {
		return err
	}
	want, got := e.Data(), d.Data()
	if !e.DataBase64 && writtenAsJSON(e.DataContentType()) {
		// Written as it is into the JSON, where the SDK's decoder skips
		// it leniently: it must be JSON, and blanks around it are not kept.
		if len(want) > 0 && !json.Valid(want) {
			return fmt.Errorf("its data (%d bytes) is not the JSON its content type %q says", len(want), e.DataContentType())
		}
		want = bytes.Trim(want, " \t\r\n")
	}
	if !bytes.Equal(want, got) {
		return fmt.Errorf("its data (%d bytes, %s) does not read back as it was", len(e.Data()), e.DataContentType())
	}
	return nil
}

// extensionsOf returns e's extensions, without the copy Extensions makes
// where it can.
func extensionsOf(e cloudevents.Event) map[string]any {
	if c, ok := e.Context.(*event.EventContextV1); ok {
		return c.Extensions
	}
	return e.Extensions()
}

func sameExtensions(want, got map[string]any) error {
	if len(want) != len(got) {
		return fmt.Errorf("its %d extensions read back as %d", len(want), len(got))
	}
	for name, v := range want {
		w, err := types.Format(v)
		if err != nil {
			return fmt.Errorf("extension %q: %w", name, err)
		}
		g, err := types.Format(got[name])
		if err != nil || g != w {
			return fmt.Errorf("its extension %q does not read back as it was", name)
		}
	}
	return nil
}

// writtenAsJSON tells whether the SDK writes data of this content type into
// the event's JSON as it is, rather than as a string (as its WriteJson
// derives the media type).
func writtenAsJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	switch strings.ToLower(strings.TrimSpace(mt)) {
	case "", event.ApplicationJSON, event.TextJSON, event.ApplicationCloudEventsJSON, event.ApplicationCloudEventsBatchJSON:
		return true
	}
	return false
}
