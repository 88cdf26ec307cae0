package watch

import (
	"context"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Bounds of a timeline.
const (
	// MaxEntries is how many events a timeline holds at most.
	MaxEntries = 2000
	// maxScan is how many journal records a timeline reads at most.
	maxScan = 200_000
	// slack is how far before the rollout's creation (and after its end)
	// the journal is read: events are stamped by their sender's clock.
	slack = time.Minute
)

// TimelineOf is a rollout's events, oldest first.
type TimelineOf struct {
	Events []Entry `json:"events"`
	// Truncated: there were more than the timeline holds or reads, or the
	// journal's retention removed its first events.
	Truncated bool `json:"truncated,omitempty"`
}

// Timeline reads ro's events back from j: those carrying its id, from
// shortly before it was created to shortly after it ended.
func Timeline(ctx context.Context, j Journal, ro rollout.Rollout) (TimelineOf, error) {
	out := TimelineOf{Events: []Entry{}}
	last := j.LastSeq()
	from, err := seqAt(ctx, j, ro.Created.Add(-slack), last)
	if err != nil {
		return out, err
	}
	if from <= j.FirstSeq() && j.FirstSeq() > 1 {
		out.Truncated = true // retention removed the start
	}
	end := time.Time{}
	if ro.Phase.Done() {
		end = ro.Updated.Add(slack)
	}
	after, scanned := from-1, 0
	if from == 0 {
		after = 0
	}
	for after < last && scanned < maxScan {
		recs, err := j.Read(ctx, after, 1000)
		if err != nil {
			return out, err
		}
		if len(recs) == 0 {
			break
		}
		for _, rec := range recs {
			scanned++
			after = rec.Seq
			if rec.Err != nil {
				continue
			}
			if !end.IsZero() && rec.Event.Time().After(end) {
				return out, nil
			}
			if events.RolloutID(rec.Event) != ro.ID {
				continue
			}
			if len(out.Events) == MaxEntries {
				out.Truncated = true
				return out, nil
			}
			out.Events = append(out.Events, EntryOf(rec))
		}
	}
	if after < last {
		out.Truncated = true
	}
	return out, nil
}

// seqAt finds the first record at or after t (by binary search over the
// records kept, their times being in journal order but for clock skew,
// which slack covers), 0 if the journal is empty.
func seqAt(ctx context.Context, j Journal, t time.Time, last uint64) (uint64, error) {
	lo, hi := j.FirstSeq(), last
	if lo == 0 {
		lo = 1
	}
	if hi < lo {
		return 0, nil
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		recs, err := j.Read(ctx, mid-1, 1)
		if err != nil {
			return 0, err
		}
		if len(recs) == 0 {
			hi = mid
			continue
		}
		if recs[0].Err == nil && recs[0].Event.Time().Before(t) {
			lo = max(recs[0].Seq+1, mid+1)
		} else {
			hi = mid
		}
	}
	return lo, nil
}
