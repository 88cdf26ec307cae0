package bus

import (
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"
)

// ExtDue is the extension of an event due later (events.ExtDue, which the
// bus cannot import: the catalogue's tests use the store).
const ExtDue = "flotilladue"

// Due returns when e is due, if it carries ExtDue.
func Due(e cloudevents.Event) (time.Time, bool) {
	v, ok := e.Extensions()[ExtDue]
	if !ok {
		return time.Time{}, false
	}
	t, err := types.ToTime(v)
	return t, err == nil
}

// SplitDue separates the events due after now (timers) from the others.
func SplitDue(evs []cloudevents.Event, now time.Time) (appendNow, later []cloudevents.Event) {
	for _, e := range evs {
		if at, ok := Due(e); ok && at.After(now) {
			later = append(later, e)
			continue
		}
		appendNow = append(appendNow, e)
	}
	return appendNow, later
}
