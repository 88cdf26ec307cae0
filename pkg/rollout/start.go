package rollout

import (
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/freeze"
)

// Gates is what deciding which clusters start needs besides the rollout:
// its application, the freeze windows of a wave, the fleet's state and the
// time.
type Gates struct {
	App    config.Application
	Freeze func(wave string) []freeze.Window
	Fleet  FleetState
	Now    time.Time
}

// GatesOf are the gates of the rollouts of application under cfg; an
// application no longer configured has none (App is zero), and nothing of
// it starts.
func GatesOf(cfg *config.Config, application string, fleet FleetState, now time.Time) Gates {
	app, ok := cfg.Application(application)
	if !ok {
		return Gates{Fleet: fleet, Now: now}
	}
	return Gates{App: app, Freeze: func(wave string) []freeze.Window { return cfg.FreezeWindows(app, wave) }, Fleet: fleet, Now: now}
}

// Start starts what of r may start now (Startable), caused by cause, unless
// something holds it: the stopped line or a pause hold the whole rollout,
// approvals, a freeze window or a pull request not merged yet the clusters
// of their wave (r.Waiting says what holds them). A started cluster moves
// to Applying with its run requested; what may start later is asked for by
// timers (a freeze window's end, a pull request's merge deadline) or the
// events that release it. Starting twice starts nothing twice: the events
// derive from cause.
func (r *Rollout) Start(cause cloudevents.Event, g Gates) ([]cloudevents.Event, error) {
	if r.Waiting = r.held(g.Fleet); r.Waiting != "" {
		return nil, nil // resuming, starting the line start them
	}
	now := g.Now.UTC()
	deadline := now.Add(g.App.Delivery.StepDeadline())
	room := r.Waves[r.Wave].Room()
	held := map[int]bool{}
	var out []cloudevents.Event
	ix := r.clusterIndex()
	for _, name := range r.Startable() {
		c, w, err := r.clusterIn(ix, name)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if _, seen := held[w]; !seen {
			why, timer, err := r.gate(cause, g, w)
			if err != nil {
				return nil, err
			}
			held[w] = why != ""
			if why != "" && r.Waiting == "" {
				r.Waiting = why
			}
			out = append(out, timer...)
		}
		if held[w] {
			continue
		}
		if w == r.Wave {
			if room == 0 {
				continue // the rest starts as these finish (wave.continued)
			}
			room--
		}
		c.Phase = ClusterApplying
		evs, err := r.requestRun(cause, c, w, events.PurposeApply, r.Ref(), r.Tag, deadline)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// held says why no cluster of r may start now, "" if they may.
func (r *Rollout) held(fleet FleetState) string {
	switch {
	case fleet.Stopped:
		return fmt.Sprintf("the fleet is stopped (by %s: %s)", fleet.By, fleet.Reason)
	case r.Paused != "":
		return "paused by " + r.Paused
	}
	return ""
}

// gate says why the clusters of wave w of r may not start now ("" if they
// may): the approvals the wave needs, or a freeze window, which a timer at
// its end releases (approving or an override start them earlier), or its
// pull request.
func (r *Rollout) gate(cause cloudevents.Event, g Gates, w int) (string, []cloudevents.Event, error) {
	wave := r.Waves[w]
	if !wave.Approved() {
		return r.approvalWaiting(w), nil, nil
	}
	var windows []freeze.Window
	if g.Freeze != nil {
		windows = g.Freeze(wave.Name)
	}
	fw, until, ok := freeze.Active(windows, g.Now)
	if !ok || wave.FreezeOverride != "" {
		return r.pullRequestGate(cause, g, w)
	}
	timer, err := events.Derive(cause, events.TypeWaveContinued, fmt.Sprintf("freeze/%s/%d", fw.Name, until.Unix()),
		events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: r.Startable()})
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("freeze window %q until %s", fw.Name, until.UTC().Format(time.RFC3339)), []cloudevents.Event{events.At(timer, until)}, nil
}

// approvalWaiting says what wave w of r waits for of its approvals.
func (r *Rollout) approvalWaiting(w int) string {
	return fmt.Sprintf("wave %d (%s) waits for %s", w+1, r.Waves[w].Name, approvalsWanted(r.Waves[w]))
}

// approvalsWanted says what approvals a wave waits for: "1 approval, has
// none", "2 approvals, has 1 (alice)", and from whom when not from anyone:
// "2 approvals, has 1 (alice): needs 1 more approval from
// group:release-managers".
func approvalsWanted(w Wave) string {
	want := plural(w.Approvals, "approval")
	if len(w.Approvers) == 0 {
		want += ", has none"
	} else {
		want = fmt.Sprintf("%s, has %d (%s)", want, len(w.Approvers), strings.Join(w.Approvers, ", "))
	}
	if len(w.ApprovalsFrom) > 0 {
		want += fmt.Sprintf(": needs %d more %s from %s", w.Approvals-len(w.Approvers), pluralWord(w.Approvals-len(w.Approvers), "approval"),
			strings.Join(w.ApprovalsFrom, " or "))
	}
	return want
}

// plural is "1 approval", "2 approvals".
func plural(n int, word string) string { return fmt.Sprintf("%d %s", n, pluralWord(n, word)) }

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// pullRequestGate holds the clusters of wave w of a GitOps application in
// mode pullRequest until the wave's pull request is merged: the first time
// it asks the proposer to open it, with a timer at its merge deadline; at
// the deadline, still unmerged, it aborts the rollout.
func (r *Rollout) pullRequestGate(cause cloudevents.Event, g Gates, w int) (string, []cloudevents.Event, error) {
	gitops := g.App.GitOps
	if gitops == nil || gitops.Mode != config.GitOpsModePullRequest || gitops.PullRequest == nil {
		return "", nil, nil
	}
	wave := &r.Waves[w]
	pr := wave.PullRequest
	if pr.Merged() {
		return "", nil, nil
	}
	now := g.Now.UTC()
	if pr == nil {
		deadline := now.Add(gitops.PullRequest.MergeDeadline.Duration)
		wave.PullRequest = &PullRequest{State: PullRequestRequested, Deadline: deadline, Updated: now}
		open, err := events.Derive(cause, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/open", w, events.PurposeApply), events.PullRequestRequested{
			RolloutID: r.ID, Application: r.Application, Wave: w, Purpose: events.PurposeApply, Op: events.PullRequestOpen, Deadline: deadline,
		})
		if err != nil {
			return "", nil, err
		}
		due, err := events.Derive(cause, events.TypeWaveContinued, fmt.Sprintf("pullrequest/%d/deadline", w),
			events.WaveStarted{RolloutID: r.ID, Wave: w, Clusters: wave.Pending()})
		if err != nil {
			return "", nil, err
		}
		return r.PullRequestWaiting(w), []cloudevents.Event{open, events.At(due, deadline)}, nil
	}
	if (pr.State == PullRequestRequested || pr.State == PullRequestOpen) && !now.Before(pr.Deadline) {
		abort, err := r.AbortForPullRequest(cause, w, fmt.Sprintf("not merged by its deadline %s", pr.Deadline.Format(time.RFC3339)))
		return r.PullRequestWaiting(w), abort, err
	}
	return r.PullRequestWaiting(w), nil, nil
}

// PullRequestWaiting says what wave w of r waits for of its pull request.
func (r *Rollout) PullRequestWaiting(w int) string {
	wave := r.Waves[w]
	pr := wave.PullRequest
	switch {
	case pr == nil || pr.State == PullRequestRequested:
		return fmt.Sprintf("wave %d (%s) waits for its pull request to be opened", w+1, wave.Name)
	case pr.State == PullRequestOpen:
		return fmt.Sprintf("wave %d (%s) waits for pull request #%d to be merged (%s) until %s%s", w+1, wave.Name, pr.Number, pr.URL,
			pr.Deadline.UTC().Format(time.RFC3339), r.merging(pr))
	}
	return fmt.Sprintf("wave %d (%s): pull request #%d %s: %s", w+1, wave.Name, pr.Number, pr.State, pr.Message)
}

// merging says where asking the host to merge pr stands, after a "; ",
// "" when flotilla does not ask (a human merges).
func (r *Rollout) merging(pr *PullRequest) string {
	switch pr.AutoMerge {
	case "":
		return ""
	case events.MergeAsked:
		return "; asked the host to merge it"
	case events.MergeScheduled:
		return "; auto-merge: scheduled (the host merges it once its required checks pass)"
	case events.MergeFailing:
		return fmt.Sprintf("; merging failed (%s), asking again at %s", pr.MergeError, pr.NextMerge.UTC().Format(time.RFC3339))
	case events.MergeFailed:
		return fmt.Sprintf("; merging failed (%s): `flotilla retry %s` asks again", pr.MergeError, r.ID)
	}
	return "; auto-merge: " + pr.AutoMerge
}

// AbortForPullRequest asks for r's abort (the one audited control path),
// caused by cause, in the name of wave w's pull request.
func (r *Rollout) AbortForPullRequest(cause cloudevents.Event, w int, reason string) ([]cloudevents.Event, error) {
	user := "its pull request"
	if pr := r.Waves[w].PullRequest; pr != nil && pr.Number != 0 {
		user = fmt.Sprintf("pull request #%d", pr.Number)
	}
	out, err := events.Derive(cause, events.TypeRolloutAbortRequested, fmt.Sprintf("pullrequest/%d", w),
		events.Control{RolloutID: r.ID, User: user, Reason: reason})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{out}, nil
}
