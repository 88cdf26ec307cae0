package proposer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Proposer answers the pull request requests of GitOps applications in
// mode pullRequest: it pushes a wave's branch and opens its pull request,
// reads it (when the host's webhook hints at a change, and by polling),
// and closes it when its wave no longer waits for it. It tells launch what
// it found (pullrequest.status). All of a pull request's network work is
// here, in process for both executors: it holds the API token.
type Proposer struct {
	cfg      config.Provider
	hosts    Hosts
	rollouts Rollouts
	lane     dispatch.Lane
	now      func() time.Time
	log      *slog.Logger
	metrics  *proposerMetrics
}

// Hosts returns the pull request host of a GitOps application
// (pullrequest.New from its config, in production).
type Hosts func(app config.Application) (pullrequest.Host, error)

// HostOf builds an application's host from its gitops.pullRequest block.
func HostOf(app config.Application) (pullrequest.Host, error) {
	g := app.GitOps
	if g == nil || g.PullRequest == nil {
		return nil, fault.Permanent(fmt.Errorf("application %s opens no pull requests", app.Name))
	}
	pr := g.PullRequest
	return pullrequest.New(pullrequest.Config{Kind: pr.Host, APIURL: pr.APIURL, Repository: pr.Repository, Token: pr.TokenValue, MergeMethod: pr.MergeMethod})
}

// proposeTimeout bounds one attempt of a request; its deadline bounds them
// all.
const proposeTimeout = 2 * time.Minute

// Rollouts reads a rollout (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
}

// New returns the proposer; hosts defaults to HostOf, log to none.
func New(cfg config.Provider, rollouts Rollouts, hosts Hosts, log *slog.Logger) *Proposer {
	if hosts == nil {
		hosts = HostOf
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Proposer{cfg: cfg, hosts: hosts, rollouts: rollouts, now: time.Now, log: log, lane: dispatch.Lane{
		Name: "pullrequests", Workers: 8, CallTimeout: proposeTimeout,
		// The request's deadline, not a count, ends the retries.
		Attempts: 1 << 20, MaxBackoff: 30 * time.Second,
	}}
}

// WithClock sets the clock the proposer reads deadlines and schedules its
// next reads and merge attempts on (default time.Now): the engine's
// (app.Options.Clock), virtual under `flotilla simulate`.
func (p *Proposer) WithClock(now func() time.Time) *Proposer {
	if now != nil {
		p.now = now
	}
	return p
}

func (*Proposer) Name() string { return "proposer" }
func (*Proposer) Consumes() []string {
	return []string{events.TypePullRequestRequested, events.TypeGitPullRequest}
}
func (p *Proposer) Lane() dispatch.Lane { return p.lane }

// Handle answers one request, or turns a host's webhook about one of
// flotilla's pull requests into a read of it.
func (p *Proposer) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if e.Type() == events.TypeGitPullRequest {
		return p.hint(ctx, e)
	}
	req, err := events.Decode[events.PullRequestRequested](e)
	if err != nil {
		return nil, err
	}
	return p.handle(ctx, e, req)
}

// hint reads the pull request a host's webhook names, when its branch is
// one of flotilla's (flotilla/<rollout>/<wave>[-revert]). The webhook
// proves nothing by itself: what the host's API says is what counts.
func (p *Proposer) hint(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	h, err := events.Decode[events.GitPullRequest](e)
	if err != nil {
		return nil, err
	}
	id, wave, purpose, ok := ParseBranch(h.HeadRef)
	if !ok {
		return nil, nil
	}
	ro, err := p.rollouts.Get(ctx, id)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if wave < 0 || wave >= len(ro.Waves) {
		return nil, nil
	}
	pr := ro.Waves[wave].PullRequest
	if purpose == events.PurposeRevert {
		pr = ro.Waves[wave].RevertPullRequest
	}
	if pr == nil || pr.Number != h.Number || pr.State != rollout.PullRequestOpen {
		return nil, nil // not the one recorded, or decided already
	}
	return p.handle(ctx, e, events.PullRequestRequested{
		RolloutID: id, Application: ro.Application, Wave: wave, Purpose: purpose,
		Op: events.PullRequestRead, Number: h.Number, Deadline: pr.Deadline, Seq: -1,
	})
}

// Branch is the branch of wave w's pull request of rollout id.
func Branch(id string, wave int, purpose string) string {
	b := fmt.Sprintf("flotilla/%s/%d", id, wave+1)
	if purpose == events.PurposeRevert {
		b += "-revert"
	}
	return b
}

// ParseBranch reads Branch's branch names back.
func ParseBranch(branch string) (id string, wave int, purpose string, ok bool) {
	rest, found := strings.CutPrefix(branch, "flotilla/")
	if !found {
		return "", 0, "", false
	}
	id, n, found := strings.Cut(rest, "/")
	if !found || id == "" {
		return "", 0, "", false
	}
	purpose = events.PurposeApply
	if s, revert := strings.CutSuffix(n, "-revert"); revert {
		n, purpose = s, events.PurposeRevert
	}
	w, err := strconv.Atoi(n)
	if err != nil || w < 1 {
		return "", 0, "", false
	}
	return id, w - 1, purpose, true
}

func (p *Proposer) handle(ctx context.Context, e cloudevents.Event, req events.PullRequestRequested) ([]cloudevents.Event, error) {
	app, ok := p.cfg.Current().Application(req.Application)
	if !ok || app.GitOps == nil || app.GitOps.PullRequest == nil {
		return nil, fault.Permanent(fmt.Errorf("application %q opens no pull requests (no longer configured so?)", req.Application))
	}
	ro, err := p.rollouts.Get(ctx, req.RolloutID)
	if err != nil {
		return nil, fmt.Errorf("reading rollout %s: %w", req.RolloutID, err)
	}
	if req.Wave < 0 || req.Wave >= len(ro.Waves) {
		return nil, fault.Permanent(fmt.Errorf("rollout %s has no wave %d", ro.ID, req.Wave+1))
	}
	host, err := p.hosts(app)
	if err != nil {
		return nil, err
	}
	status := events.PullRequestStatus{RolloutID: ro.ID, Wave: req.Wave, Purpose: req.Purpose, Number: req.Number,
		Branch: Branch(ro.ID, req.Wave, req.Purpose)}
	var out []cloudevents.Event
	switch req.Op {
	case events.PullRequestOpen:
		out, err = p.open(ctx, e, app, ro, host, req, &status)
	case events.PullRequestRead:
		out, err = p.read(ctx, e, app, ro, host, req, &status)
	case events.PullRequestMerge:
		out, err = p.merge(ctx, app, ro, host, req, &status)
	case events.PullRequestClose:
		// Asked by launch when the rollout no longer waits for it.
		if err = p.close(ctx, host, req); err == nil {
			status.State, status.Actor = events.PullRequestClosed, "flotilla"
		}
	default:
		return nil, fault.Permanent(fmt.Errorf("pull request op %q: want open, read, merge or close", req.Op))
	}
	switch {
	case err == nil:
	case fault.IsPermanent(err), !p.now().Before(req.Deadline):
		status.State, status.Error = events.PullRequestFailed, err.Error()
		out = nil
	default:
		return nil, err // retried until the deadline
	}
	if status.State == "" {
		return out, nil // nothing new to tell
	}
	if req.Op != events.PullRequestMerge || status.State != events.PullRequestOpened {
		// A merge's progress is no new outcome of the pull request.
		asked := req.Deadline.Add(-app.GitOps.PullRequest.MergeDeadline.Duration)
		p.metrics.observe(app.GitOps.PullRequest.Host, status.State, asked, p.now())
	}
	st, err := events.Derive(e, events.TypePullRequestStatus, fmt.Sprintf("%d/%s/%s", req.Wave, req.Purpose, status.State), status)
	if err != nil {
		return nil, err
	}
	return append(out, st), nil
}

// open pushes the wave's branch and opens (or finds) its pull request.
func (p *Proposer) open(ctx context.Context, e cloudevents.Event, app config.Application, ro rollout.Rollout, host pullrequest.Host,
	req events.PullRequestRequested, status *events.PullRequestStatus) ([]cloudevents.Event, error) {
	if req.Purpose == events.PurposeApply && (ro.Phase != rollout.Progressing || ro.Wave != req.Wave) {
		// Superseded or ended before its pull request opened: none opens.
		p.log.InfoContext(ctx, "not opening the pull request of a wave that no longer waits", "rollout_id", ro.ID, "wave", req.Wave+1, "phase", ro.Phase)
		return nil, nil
	}
	repo, changes, err := p.changes(app, ro, req)
	if err != nil {
		return nil, err
	}
	pr := app.GitOps.PullRequest
	proposed, err := gitops.Propose(ctx, repo, gitops.Proposal{Branch: status.Branch, Changes: changes, Message: commitMessage(ro, req)})
	if err != nil {
		return nil, fmt.Errorf("pushing %s: %w", status.Branch, err)
	}
	if proposed.Unchanged {
		status.State, status.Verified = events.PullRequestUnchanged, true
		return nil, nil
	}
	info, err := host.Open(ctx, pullrequest.PR{
		Head: status.Branch, Base: proposed.BaseBranch, Title: title(ro, req), Body: body(ro, req, proposed),
		Labels: pr.Labels, Reviewers: pr.Reviewers,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the pull request of %s: %w", status.Branch, err)
	}
	fill(status, info)
	if status.State == events.PullRequestMerged {
		return nil, p.verify(ctx, repo, changes, status)
	}
	out, err := p.poll(app, req, info.Number)
	if err != nil || info.State != pullrequest.Open || (!pr.AutoMerge && req.Purpose != events.PurposeRevert) {
		return out, err
	}
	// The merge is a step of its own, so the rollout says the pull request
	// is open while the host is asked, and a host failing to merge is
	// told and asked again, not retried unseen.
	merge, err := p.mergeRequest(req, info.Number, info.HeadSHA, 1, p.now().UTC(), p.now().UTC())
	if err != nil {
		return nil, err
	}
	status.AutoMerge = events.MergeAsked
	return append(out, merge), nil
}

// Merge retries: the first again after mergeFirstBackoff, each next after
// twice the last (at most mergeMaxBackoff), while within the application's
// gitops.pullRequest.mergeRetryFor of the first attempt (and before the
// merge deadline); a host failing for longer waits for a user's retry.
const (
	mergeFirstBackoff = 2 * time.Second
	mergeMaxBackoff   = 30 * time.Second
)

// mergeRequest is attempt of asking the host to merge pull request
// number at head, due at due; since is when the first attempt was asked.
func (p *Proposer) mergeRequest(req events.PullRequestRequested, number int64, head string, attempt int, since, due time.Time) (cloudevents.Event, error) {
	id := fmt.Sprintf("%s/pullrequest/%d/%s/%d/merge/%d/%d", req.RolloutID, req.Wave, req.Purpose, number, req.Retry, attempt)
	e, err := events.New(id, events.Source, events.TypePullRequestRequested, events.PullRequestRequested{
		RolloutID: req.RolloutID, Application: req.Application, Wave: req.Wave, Purpose: req.Purpose,
		Op: events.PullRequestMerge, Number: number, Head: head, Images: req.Images, Tags: req.Tags, Deadline: req.Deadline,
		Attempt: attempt, Since: since, Retry: req.Retry,
	})
	if err != nil {
		return e, err
	}
	e.SetExtension(events.ExtRolloutID, req.RolloutID)
	if due.After(p.now()) {
		e = events.At(e, due)
	}
	return e, nil
}

// merge asks the host to merge the pull request, now or once its
// required checks pass. What the host answered goes to launch; an error
// is told with when flotilla asks again, or, past the budget (or for an
// answer retrying cannot change), that only a user's retry will.
func (p *Proposer) merge(ctx context.Context, app config.Application, ro rollout.Rollout, host pullrequest.Host,
	req events.PullRequestRequested, status *events.PullRequestStatus) ([]cloudevents.Event, error) {
	recorded := ro.Waves[req.Wave].PullRequest
	if req.Purpose == events.PurposeRevert {
		recorded = ro.Waves[req.Wave].RevertPullRequest
	}
	// Launch may not have recorded the opening yet: the request is
	// journaled with it.
	waits := recorded != nil && (recorded.State == rollout.PullRequestRequested ||
		(recorded.State == rollout.PullRequestOpen && recorded.Number == req.Number))
	if !waits || (req.Purpose == events.PurposeApply && (ro.Phase != rollout.Progressing || ro.Wave != req.Wave)) {
		return nil, nil // decided meanwhile, or the wave no longer waits (a read closes it)
	}
	am, err := host.AutoMerge(ctx, req.Number, req.Head)
	if err == nil {
		status.AutoMerge = string(am.State)
		if am.Reason != "" {
			status.AutoMerge += ": " + am.Reason
		}
		if am.State != pullrequest.AutoMerged {
			status.State = events.PullRequestOpened
			return nil, nil
		}
		info, err := host.Get(ctx, req.Number)
		if err != nil {
			return nil, err
		}
		fill(status, info)
		if status.State != events.PullRequestMerged {
			return nil, nil
		}
		repo, changes, err := p.changes(app, ro, req)
		if err != nil {
			return nil, err
		}
		return nil, p.verify(ctx, repo, changes, status)
	}
	if ctx.Err() != nil {
		return nil, err // this process is stopping: the lane asks again
	}
	p.metrics.mergeFailed(app.GitOps.PullRequest.Host)
	status.State, status.Number, status.MergeError = events.PullRequestOpened, req.Number, err.Error()
	backoff := min(mergeFirstBackoff<<min(req.Attempt-1, 10), mergeMaxBackoff)
	next := p.now().UTC().Add(backoff)
	if fault.IsPermanent(err) || next.After(req.Since.Add(app.GitOps.PullRequest.MergeRetryFor.Duration)) || !next.Before(req.Deadline) {
		p.log.WarnContext(ctx, "the host failed to merge a pull request; waiting for a retry", "rollout_id", ro.ID,
			"number", req.Number, "attempt", req.Attempt, "error", err)
		status.AutoMerge = events.MergeFailed
		return nil, nil
	}
	p.log.InfoContext(ctx, "the host failed to merge a pull request; asking again", "rollout_id", ro.ID,
		"number", req.Number, "attempt", req.Attempt, "next", next, "error", err)
	status.AutoMerge, status.NextMerge = events.MergeFailing, next
	again, err := p.mergeRequest(req, req.Number, req.Head, req.Attempt+1, req.Since, next)
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{again}, nil
}

// read reads the pull request; while it is open, the next read is due at
// the poll interval. A wave no longer waiting for it gets it closed.
func (p *Proposer) read(ctx context.Context, e cloudevents.Event, app config.Application, ro rollout.Rollout, host pullrequest.Host,
	req events.PullRequestRequested, status *events.PullRequestStatus) ([]cloudevents.Event, error) {
	recorded := ro.Waves[req.Wave].PullRequest
	if req.Purpose == events.PurposeRevert {
		recorded = ro.Waves[req.Wave].RevertPullRequest
	}
	if recorded == nil || recorded.State != rollout.PullRequestOpen || recorded.Number != req.Number {
		return nil, nil // decided meanwhile (a webhook's read, a redelivery)
	}
	if req.Purpose == events.PurposeApply && (ro.Phase != rollout.Progressing || ro.Wave != req.Wave) {
		return nil, p.close(ctx, host, events.PullRequestRequested{Number: req.Number, Purpose: req.Purpose,
			Deadline: req.Deadline, RolloutID: ro.ID, Wave: req.Wave, Op: events.PullRequestClose, Reason: ro.Reason})
	}
	info, err := host.Get(ctx, req.Number)
	if err != nil {
		return nil, err
	}
	switch info.State {
	case pullrequest.Open:
		if req.Seq < 0 {
			return nil, nil // a webhook's hint: the poll goes on as it was
		}
		return p.poll(app, req, req.Number)
	case pullrequest.Merged:
		fill(status, info)
		repo, changes, err := p.changes(app, ro, req)
		if err != nil {
			return nil, err
		}
		return nil, p.verify(ctx, repo, changes, status)
	}
	fill(status, info)
	return nil, nil
}

// close closes a pull request its wave no longer waits for.
func (p *Proposer) close(ctx context.Context, host pullrequest.Host, req events.PullRequestRequested) error {
	if req.Number == 0 {
		return nil
	}
	why := "it ended, failed or was superseded"
	if req.Reason != "" {
		why = req.Reason
	}
	msg := fmt.Sprintf("flotilla: rollout %s no longer waits for this pull request (%s); closing it.", req.RolloutID, why)
	if err := host.Close(ctx, req.Number, msg); err != nil {
		if fault.IsPermanent(err) || !p.now().Before(req.Deadline.Add(time.Hour)) {
			p.log.WarnContext(ctx, "not closing a pull request", "rollout_id", req.RolloutID, "number", req.Number, "error", err)
			return nil
		}
		return err
	}
	return nil
}

// verify checks that the base holds every change after the merge: a pull
// request edited in review does not roll out what it no longer says.
func (p *Proposer) verify(ctx context.Context, repo gitops.Repo, changes []gitops.Change, status *events.PullRequestStatus) error {
	held, head, err := gitops.Holds(ctx, repo, changes)
	if err != nil {
		return fmt.Errorf("reading the base after #%d merged: %w", status.Number, err)
	}
	status.Verified = held
	if !held {
		status.Error = fmt.Sprintf("pull request #%d merged, but the base (at %.12s) does not hold the images it proposed", status.Number, head)
	}
	return nil
}

// poll is the next read of an open pull request, due at the poll
// interval (none past the deadline: launch's deadline timer decides then).
func (p *Proposer) poll(app config.Application, req events.PullRequestRequested, number int64) ([]cloudevents.Event, error) {
	due := p.now().UTC().Add(app.GitOps.PullRequest.PollInterval.Duration)
	if !due.Before(req.Deadline) {
		return nil, nil
	}
	seq := max(req.Seq, 0) + 1
	// A stable id, not one derived from the previous read's (which would
	// grow with every poll): a redelivered read asks for the same next one.
	id := fmt.Sprintf("%s/pullrequest/%d/%s/%d/read/%d", req.RolloutID, req.Wave, req.Purpose, number, seq)
	next, err := events.New(id, events.Source, events.TypePullRequestRequested, events.PullRequestRequested{
		RolloutID: req.RolloutID, Application: req.Application, Wave: req.Wave, Purpose: req.Purpose,
		Op: events.PullRequestRead, Number: number, Deadline: req.Deadline, Seq: seq,
	})
	if err != nil {
		return nil, err
	}
	next.SetExtension(events.ExtRolloutID, req.RolloutID)
	return []cloudevents.Event{events.At(next, due)}, nil
}

// changes are the wave's bumps: the rollout's image into every cluster's
// files; for a revert, each cluster's previous image.
func (p *Proposer) changes(app config.Application, ro rollout.Rollout, req events.PullRequestRequested) (gitops.Repo, []gitops.Change, error) {
	g := app.GitOps
	repo := gitops.Repo{URL: g.URL, Branch: g.Branch, Auth: pipelines.GitAuthOf(g)}
	byImage := map[string]*gitops.Change{}
	var order []string
	for _, c := range ro.Waves[req.Wave].Clusters {
		ref := pipelines.GitImage(ro.Ref(), ro.Tag)
		if req.Purpose == events.PurposeRevert {
			prev, ok := req.Images[c.Name]
			if !ok {
				continue // it did not take the rollout's image
			}
			ref = pipelines.GitImage(prev, req.Tags[c.Name])
		}
		gp, err := pipelines.GitOpsFor(app, c.Name)
		if err != nil {
			return repo, nil, err
		}
		edit, err := gitops.NewEdit(gp.Edit, gp.EditOptions)
		if err != nil {
			return repo, nil, err
		}
		ch, seen := byImage[ref]
		if !seen {
			img, err := gitops.ParseImage(ref)
			if err != nil {
				return repo, nil, fault.Permanent(fmt.Errorf("image %q of %s: %w", ref, c.Name, err))
			}
			ch = &gitops.Change{App: app.Name, Rollout: ro.ID, Image: img}
			byImage[ref], order = ch, append(order, ref)
		}
		for _, path := range gp.Paths {
			ch.Files = append(ch.Files, gitops.File{Path: path, Edit: edit})
		}
	}
	if len(order) == 0 {
		return repo, nil, fault.Permanent(fmt.Errorf("wave %d of %s has nothing to propose", req.Wave+1, ro.ID))
	}
	changes := make([]gitops.Change, 0, len(order))
	for _, ref := range order {
		changes = append(changes, *byImage[ref])
	}
	return repo, changes, nil
}

func fill(s *events.PullRequestStatus, in pullrequest.Info) {
	s.Number, s.URL, s.Head = in.Number, in.URL, in.HeadSHA
	switch in.State {
	case pullrequest.Open:
		s.State = events.PullRequestOpened
	case pullrequest.Merged:
		s.State, s.MergeCommit = events.PullRequestMerged, in.MergeCommit
	case pullrequest.Closed:
		s.State = events.PullRequestClosed
	}
}
