package resync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Journal records the events the Resyncer synthesizes.
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) (int, error)
}

// Options tune the Resyncer; zero values take the defaults in brackets.
type Options struct {
	Interval time.Duration // between passes [15s]
	Overdue  time.Duration // quiet time after which a cluster is read [20s]
	Logger   *slog.Logger  // [discard]
	Now      func() time.Time
}

// Rollouts is the rollout state resync reads (pkg/state).
type Rollouts interface {
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
}

// StatusReader reads a canary's live state (pkg/cluster.Set).
type StatusReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (cluster.CanaryStatus, error)
}

// Resyncer reads overdue clusters' canary status into the journal.
type Resyncer struct {
	cfg    config.Provider
	repo   Rollouts
	status StatusReader
	j      Journal
	o      Options
}

// New returns a Resyncer.
func New(cfg config.Provider, repo Rollouts, status StatusReader, j Journal, o Options) *Resyncer {
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.Overdue <= 0 {
		o.Overdue = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resyncer{cfg: cfg, repo: repo, status: status, j: j, o: o}
}

// Run reads every waiting cluster at once (catching up on what happened while
// flotilla was down), then the overdue ones every interval.
func (r *Resyncer) Run(ctx context.Context) error {
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for first := true; ; first = false {
		if err := r.Pass(ctx, !first); err != nil && ctx.Err() == nil {
			r.o.Logger.WarnContext(ctx, "resync pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass reads every waiting cluster of every in-flight rollout that has been
// quiet for longer than Overdue (or every one, with all) and journals a canary
// event for each cluster whose canary has settled since it was applied.
func (r *Resyncer) Pass(ctx context.Context, onlyOverdue bool) error {
	ros, err := r.repo.ListInFlight(ctx)
	if err != nil {
		return err
	}
	for _, ro := range ros {
		if ro.Phase != rollout.Progressing && ro.Phase != rollout.Failed {
			continue
		}
		if onlyOverdue && r.o.Now().Sub(ro.Updated) < r.o.Overdue {
			continue
		}
		if err := r.rollout(logctx.With(ctx, logctx.RolloutID, ro.ID), ro); err != nil {
			return err
		}
	}
	return nil
}

// rollout reads the waiting clusters of ro and journals a canary event for
// each that has settled since it was applied. ctx carries ro's id for the
// log.
func (r *Resyncer) rollout(ctx context.Context, ro rollout.Rollout) error {
	app, ok := r.cfg.Current().Application(ro.Application)
	if !ok {
		return nil
	}
	var out []cloudevents.Event
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			if c.Phase != rollout.ClusterProgressing && c.Phase != rollout.ClusterReverting {
				continue
			}
			st, err := r.status.CanaryStatus(ctx, c.Name, app.Namespace, app.Workload)
			if err != nil {
				r.o.Logger.WarnContext(ctx, "resync: reading canary", "cluster", c.Name, logctx.RolloutID, ro.ID, "error", err)
				continue
			}
			// Only a phase Flagger reached after our apply says anything
			// about this rollout. Flagger keeps the transition time in
			// whole seconds, so compare at that precision (observe checks
			// the images anyway, so an earlier phase in the same second
			// cannot move the rollout wrongly).
			if !st.Settled() || st.Transition.Before(c.Applied.Truncate(time.Second)) {
				continue
			}
			e, err := Event(ro.ID, c.Name, app, st)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	n, err := r.j.Append(ctx, out...)
	if err != nil {
		return fmt.Errorf("journaling resync events of rollout %s: %w", ro.ID, err)
	}
	if n > 0 {
		r.o.Logger.InfoContext(ctx, "resync recovered canary states", logctx.RolloutID, ro.ID, "events", n)
	}
	return nil
}

// Event is the canary event a status read stands for. Its id is a hash of
// what was read, so reading the same state again adds nothing to the journal.
func Event(rolloutID, clusterName string, app config.Application, st cluster.CanaryStatus) (cloudevents.Event, error) {
	msg := fmt.Sprintf("status read by flotilla: phase %s, primary %s, canary %s", st.Phase, st.PrimaryImage, st.TargetImage)
	h := sha256.Sum256([]byte(rolloutID + "\x00" + clusterName + "\x00" + msg + "\x00" + st.Checksum))
	e, err := events.New("resync/"+hex.EncodeToString(h[:16]), "/flotilla/resync", events.TypeCanary, events.Canary{
		Cluster: clusterName, Namespace: app.Namespace, Name: app.Workload.Name, Phase: st.Phase,
		Outcome: outcome(st.Phase), Message: msg, Checksum: st.Checksum, RolloutID: rolloutID, Receiver: "resync",
	})
	if err != nil {
		return e, err
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e, nil
}

func outcome(phase string) events.CanaryOutcome {
	switch phase {
	case "Succeeded":
		return events.CanarySucceeded
	case "Initialized":
		return events.CanaryInitialized
	case "Failed":
		return events.CanaryFailed
	}
	return events.CanaryProgressing
}
