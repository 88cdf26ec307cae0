package store

import (
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// BenchmarkEncodeEvents measures what Append spends on the CPU before the
// writer: validating and encoding an event as the intake sends them (JSON
// payload, time, one extension), without the disk.
func BenchmarkEncodeEvents(b *testing.B) {
	e := cloudevents.NewEvent()
	e.SetID("registry/6f1c3a2b-0d4e-4f5a-9b8c-7d6e5f4a3b2c")
	e.SetSource("/hooks/registry")
	e.SetType("dev.flotilla.image.pushed.v1")
	e.SetTime(time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC))
	e.SetExtension("rolloutid", "r-1234")
	payload := map[string]string{"registry": "registry.example.com:5000", "repository": "team/app", "tag": "1.2.3",
		"digest": "sha256:" + fmt.Sprintf("%064x", 42), "sender": "distribution", "receiver": "registry"}
	if err := e.SetData(cloudevents.ApplicationJSON, payload); err != nil {
		b.Fatal(err)
	}
	evs := []cloudevents.Event{e}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bus.Encode(evs); err != nil {
			b.Fatal(err)
		}
	}
}
