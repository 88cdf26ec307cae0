package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/events/intake"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// Scale-out targets: the same intake on scale-out mode's bus, a JetStream
// stream replicated on a three-node NATS cluster on this machine, as
// flotilla's config server.bus runs it (16 partitions, 24 h duplicates
// window); each replica its own connection, as separate pods have.
const (
	nameNATS1 = "flotilla POST /events, NATS R3, 1 replica"
	nameNATS3 = "flotilla POST /events, NATS R3, 3 replicas"
)

// startNATSTargets starts a three-node JetStream cluster under dir and
// the intakes of one and of three replicas on it.
func startNATSTargets(ctx context.Context, dir, run string) ([]target, func(), error) {
	cluster, err := natstest.Start(ctx, filepath.Join(dir, "nats"), 3)
	if err != nil {
		return nil, nil, fmt.Errorf("starting NATS: %w", err)
	}
	closers := []func(){cluster.Stop}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	replica := func(stream string) (string, error) {
		nc, err := nats.Connect(cluster.URL(), nats.MaxReconnects(-1))
		if err != nil {
			return "", err
		}
		closers = append(closers, nc.Close)
		b, err := natsjs.Open(ctx, nc, natsjs.Options{Stream: stream, Subject: "flotilla." + stream, Partitions: 16, Replicas: 3})
		if err != nil {
			return "", err
		}
		closers = append(closers, func() { _ = b.Close() })
		in, err := intake.New([]intake.ReceiverConfig{
			{Name: "events", Type: "cloudevents", Secret: token, RateLimit: intake.RateLimit{PerSecond: -1}},
		}, natsJournal{b}, intake.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return "", err
		}
		mux := http.NewServeMux()
		mux.Handle(intake.EventsPath, in)
		url, stop, err := serve(ctx, mux)
		if err != nil {
			return "", err
		}
		closers = append(closers, stop)
		return url + intake.EventsPath, nil
	}
	one, err := replica("ONE")
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	var three []string
	for range 3 {
		u, err := replica("THREE")
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		three = append(three, u)
	}
	return []target{
		{name: nameNATS1, url: one, request: cloudEventRequest(run + "-nats1"), scaleOut: true},
		{name: nameNATS3, urls: three, turn: new(turn), request: cloudEventRequest(run + "-nats3"), scaleOut: true},
	}, closeAll, nil
}

// natsJournal adapts the bus to the intake, as pkg/app does.
type natsJournal struct{ b *natsjs.Bus }

func (j natsJournal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.b.Append(ctx, evs...)
	return len(recs), err
}

// next is the URL of a target's next request: its one URL, or its
// replicas' in turn (as a Service spreads connections).
func (t *target) next() string {
	if len(t.urls) == 0 {
		return t.url
	}
	return t.urls[t.turn.Add(1)%uint64(len(t.urls))]
}

// turn counts a target's requests, to spread them over its replicas.
type turn = atomic.Uint64
