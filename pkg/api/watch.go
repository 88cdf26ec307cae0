package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// Watch streams the journal live and reads timelines (pkg/watch's Hub).
type Watch interface {
	Subscribe(rollout string, events bool) *watch.Sub
	Timeline(ctx context.Context, ro rollout.Rollout) (watch.TimelineOf, error)
}

// WithWatch serves GET /api/v1/watch and the rollouts' timelines.
func (a *API) WithWatch(w Watch) *API {
	a.watch = w
	return a
}

// heartbeat is how often an idle stream gets a comment, so that proxies
// keep it and a gone client is noticed.
const heartbeat = 15 * time.Second

// streamWriteTimeout bounds one write to a watcher.
const streamWriteTimeout = 10 * time.Second

// watchStream serves Server-Sent Events: "event" (an event journaled, a
// watch.Entry) and "rollout" (a rollout as it is after that event), for
// every rollout or the one of ?rollout=; ?only=rollouts leaves the events
// out. The stream starts at the journal's next record: read the state
// (GET /api/v1/rollouts) once it is open. It ends when flotilla drops a
// watcher that fell behind; the browser's EventSource reconnects.
func (a *API) watchStream(w http.ResponseWriter, r *http.Request) {
	if a.watch == nil {
		writeError(w, fault.New(fault.ErrNotFound, "watching is not enabled"))
		return
	}
	q := r.URL.Query()
	id := q.Get("rollout")
	only := q.Get("only")
	if only != "" && only != "rollouts" {
		writeError(w, fault.Permanent(fmt.Errorf("only: want rollouts (or nothing), got %q", only)))
		return
	}
	if id != "" {
		if ro, err := a.rollouts.Get(r.Context(), id); err == nil && a.forbidRead(w, r, identity.ResourceRollouts, ro.Application) {
			return
		}
	}
	filter := a.watchFilter(r.Context()) // another project's rollouts and events: left out
	sub := a.watch.Subscribe(id, only == "")
	defer sub.Close()
	rc := http.NewResponseController(w)
	// The server's write timeout is for ordinary answers, not streams.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// retry: how long the browser waits before it reconnects.
	if send(w, rc, "retry: 2000\n: watching "+dashIfEmpty(id)+"\n\n") != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return
		case m, ok := <-sub.C:
			if !ok {
				return
			}
			if msg = drain(m, sub.C, filter.keep); msg == "" {
				continue
			}
		case <-tick.C:
			msg = ": ping\n\n"
		}
		if send(w, rc, msg) != nil {
			return
		}
	}
}

// maxWrite bounds the messages written to a watcher at once.
const maxWrite = 1 << 20

// drain renders m and the messages already waiting behind it, those keep
// keeps: one write and one flush for a batch of the journal, not one per
// message.
func drain(m watch.Message, c <-chan watch.Message, keep func(watch.Message) bool) string {
	var b strings.Builder
	for {
		if keep(m) {
			fmt.Fprintf(&b, "event: %s\nid: %d\ndata: %s\n\n", m.Kind, m.Seq, m.Data)
		}
		if b.Len() >= maxWrite {
			return b.String()
		}
		var ok bool
		select {
		case m, ok = <-c:
			if !ok { // dropped: what is here still goes out
				return b.String()
			}
		default:
			return b.String()
		}
	}
}

func send(w http.ResponseWriter, rc *http.ResponseController, msg string) error {
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := fmt.Fprint(w, msg); err != nil {
		return err
	}
	return rc.Flush()
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "every rollout"
	}
	return "rollout " + s
}

// getTimeline answers a rollout's events, oldest first (watch.TimelineOf).
func (a *API) getTimeline(w http.ResponseWriter, r *http.Request) {
	if a.watch == nil {
		writeError(w, fault.New(fault.ErrNotFound, "timelines are not enabled"))
		return
	}
	ro, err := a.rollouts.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	tl, err := a.watch.Timeline(r.Context(), ro)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tl)
}
