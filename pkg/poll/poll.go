package poll

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Registry lists a repository's tags and resolves one to its digest
// (pkg/registry.Remote), image being "host[:port]/repository".
type Registry interface {
	Tags(ctx context.Context, image string) ([]string, error)
	Resolve(ctx context.Context, image, tag string) (digest string, err error)
	// Created is when image@digest was built (its config's created
	// time; zero if it does not say): track Newest's order.
	Created(ctx context.Context, image, digest string) (time.Time, error)
}

// Heads reads the commit a git application's branch points at now, as
// `git ls-remote` (pkg/gitops.Head, with the source's credentials).
type Heads interface {
	Head(ctx context.Context, src config.GitSource) (commit string, err error)
}

// Rollouts is the rollout state a poll decides against (pkg/state).
type Rollouts interface {
	App(ctx context.Context, name string) (rollout.AppState, error)
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	Get(ctx context.Context, id string) (rollout.Rollout, error)
}

// Journal records the pushes a poll finds; it reports how many were new.
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) (int, error)
}

// Options tune the Poller; zero values take the defaults in brackets.
type Options struct {
	Logger *slog.Logger // [discard]
	// Metrics registers the poll's metrics [none].
	Metrics prometheus.Registerer
	// Owns says whether this replica polls the application (scale-out
	// mode: the partition of its pushes is held here) [every one].
	Owns func(app config.Application) bool
	// Timeout bounds one poll of an application [30s].
	Timeout time.Duration
	// Rand returns a number in [0, 1) for the jitter [math/rand/v2].
	Rand func() float64
	// Heads reads git applications' branches [none: git applications
	// are not polled].
	Heads Heads
	// Changed is closed when another configuration is swapped in
	// (config.Live.Changed): Run then polls the applications it has
	// [none: the applications polled are those at Run's start].
	Changed func() <-chan struct{}
}

// MaxBackoff is how far the interval of a failing registry grows: doubled
// at each failure in a row, up to MaxBackoff times.
const MaxBackoff = 8

// Jitter is the part of an interval added at random to each wait, so that
// applications polled at the same interval spread out.
const Jitter = 0.1

// Poller polls the applications' registries.
type Poller struct {
	cfg config.Provider
	reg Registry
	ros Rollouts
	j   Journal
	o   Options

	polls *prometheus.CounterVec
	found *prometheus.CounterVec

	mu   sync.Mutex
	last map[string]Result // by application
	// built is, per application on track Newest, what each tag read so
	// far points at and when it was built: a tag is read once.
	built map[string]map[string]rollout.Built
}

// MaxReads bounds the tags a poll of a track Newest application reads
// (digest and build time, two requests each) that earlier polls did not:
// a repository of thousands of tags is read over several polls, the
// lexically last first, instead of in one burst.
const MaxReads = 50

// Outcomes of a poll (the outcome label of flotilla_polls_total).
const (
	OutcomeCurrent = "current" // nothing newer than what the webhooks brought
	OutcomeFound   = "found"   // a newer version, fed in as a push
	OutcomeRepeat  = "repeat"  // a version a poll fed in already (the journal had it)
	OutcomeError   = "error"   // the registry or the state failed
)

// New returns a Poller over cfg's applications.
func New(cfg config.Provider, reg Registry, ros Rollouts, j Journal, o Options) (*Poller, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Owns == nil {
		o.Owns = func(config.Application) bool { return true }
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	p := &Poller{cfg: cfg, reg: reg, ros: ros, j: j, o: o, last: map[string]Result{}, built: map[string]map[string]rollout.Built{},
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_polls_total",
			Help: "Polls of the applications' registries by outcome: current (nothing newer), found (a newer version fed in as a push), repeat (fed in before), error.",
		}, []string{"outcome"}),
		found: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_poll_found_total",
			Help: "Versions a poll found that no webhook had brought, fed in as pushes (their rollouts say source: poll).",
		}, []string{"application"}),
	}
	if o.Metrics != nil {
		for _, c := range []prometheus.Collector{p.polls, p.found} {
			if err := o.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("registering poll metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Result is what one poll of an application found.
type Result struct {
	Application string `json:"application"`
	Image       string `json:"image"`
	// Tags is how many tags the registry listed.
	Tags int `json:"tags"`
	// Newest is the newest tag the application would roll out now that no
	// rollout was started for, "" when none (Reason says why); Digest is
	// what it points at.
	Newest string `json:"newest,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Started: the poll fed Newest in as a push (EventID), new to the
	// journal; verify and plan take it from there, as a webhook's.
	Started bool      `json:"started"`
	EventID string    `json:"eventId,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// Members, of a release set of image members, is what the poll of
	// each member found (pollSet); the set's fields above sum them up.
	Members []Result `json:"members,omitempty"`
}

// ErrNotPolled: the application is not one a poll can look at.
var ErrNotPolled = errors.New("not polled")

// Poll polls app now: lists its tags, picks the newest it would roll out
// that no rollout was started for, and journals it as a push.
func (p *Poller) Poll(ctx context.Context, name string) (Result, error) {
	app, ok := p.cfg.Current().Application(name)
	if !ok {
		return Result{}, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", name))
	}
	if app.Git() != nil && p.o.Heads == nil {
		return Result{}, fault.Permanent(fmt.Errorf("application %s follows a git repository: %w", name, ErrNotPolled))
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	var res Result
	var err error
	if g := app.Git(); g != nil {
		res, err = p.pollGit(ctx, app, *g)
		res.Image = config.DisplayURL(g.URL)
	} else if rollout.ImageSet(app) {
		res, err = p.pollSet(ctx, app)
	} else {
		res, err = p.poll(ctx, app)
		res.Image = app.Image
	}
	res.Application, res.At = app.Name, time.Now()
	outcome := OutcomeCurrent
	switch {
	case err != nil:
		outcome = OutcomeError
		res.Reason = err.Error()
	case res.Started:
		outcome = OutcomeFound
		p.found.WithLabelValues(app.Name).Inc()
	case res.EventID != "":
		outcome = OutcomeRepeat
	}
	p.polls.WithLabelValues(outcome).Inc()
	p.mu.Lock()
	p.last[app.Name] = res
	p.mu.Unlock()
	return res, err
}

func (p *Poller) poll(ctx context.Context, app config.Application) (Result, error) {
	var res Result
	tags, err := p.reg.Tags(ctx, app.Image)
	if err != nil {
		return res, upstream(err)
	}
	res.Tags = len(tags)
	st, inFlight, err := p.state(ctx, app)
	if err != nil {
		return res, err
	}
	if app.Track == config.TrackNewest {
		return p.pollNewest(ctx, app, st, inFlight, tags, res)
	}
	tag, reason, err := rollout.Polled(app, st, inFlight, tags)
	if err != nil {
		return res, err
	}
	if tag == "" {
		res.Reason = reason
		return p.moved(ctx, app, st, inFlight, tags, res)
	}
	res.Newest = tag
	if res.Digest, err = p.reg.Resolve(ctx, app.Image, tag); err != nil {
		return res, upstream(err)
	}
	e, err := Event(app.Image, tag, res.Digest)
	if err != nil {
		return res, err
	}
	return p.journal(ctx, app, res, e)
}

// pollNewest is poll for track Newest: it reads the digest and build time
// of the tags not read before (up to MaxReads) and feeds in the most
// recently built one the application would roll out.
func (p *Poller) pollNewest(ctx context.Context, app config.Application, st rollout.AppState, inFlight []rollout.Rollout, tags []string, res Result) (Result, error) {
	imgs, err := p.readBuilt(ctx, app, tags)
	if err != nil {
		return res, err
	}
	b, found, reason, err := rollout.PolledNewest(app, st, inFlight, imgs)
	if err != nil {
		return res, err
	}
	if !found {
		res.Reason = reason
		return p.moved(ctx, app, st, inFlight, tags, res)
	}
	res.Newest, res.Digest = b.Tag, b.Digest
	e, err := Event(app.Image, b.Tag, b.Digest)
	if err != nil {
		return res, err
	}
	return p.journal(ctx, app, res, e)
}

// moved reads what the deployed tag points at now and, when it was pushed
// again with a new digest (rebuilt: its webhook dropped), feeds that in as
// a webhook's push of it would be (rollout.PolledMoved). One request more
// per poll (a HEAD of the tag's manifest); res is returned as it came when
// the tag has not moved.
func (p *Poller) moved(ctx context.Context, app config.Application, st rollout.AppState, inFlight []rollout.Rollout, tags []string, res Result) (Result, error) {
	tag := st.DeployedTag
	if tag == "" || st.DeployedDigest == "" || !slices.Contains(tags, tag) {
		return res, nil
	}
	digest, err := p.reg.Resolve(ctx, app.Image, tag)
	if err != nil {
		return res, upstream(err)
	}
	if digest == st.DeployedDigest {
		return res, nil
	}
	img := rollout.Built{Tag: tag, Digest: digest}
	if app.Track == config.TrackNewest {
		if img.Created, err = p.reg.Created(ctx, app.Image, digest); err != nil {
			return res, upstream(err)
		}
	}
	var latest *rollout.Rollout
	if st.LatestTag == tag && st.LatestRollout != "" && st.LatestRollout != st.DeployedRollout {
		ro, err := p.ros.Get(ctx, st.LatestRollout)
		switch {
		case err == nil && app.MemberOf != "":
			// The set's rollout, as a rollout of the member's version.
			if mr, ok := rollout.MemberRollout(app.Name, ro); ok {
				latest = &mr
			}
		case err == nil:
			latest = &ro
		case !errors.Is(err, rollout.ErrNotFound):
			return res, fmt.Errorf("reading rollout %s: %w", st.LatestRollout, err)
		}
	}
	ok, reason, err := rollout.PolledMoved(app, st, inFlight, img, latest)
	if err != nil || !ok {
		if reason != "" {
			res.Reason = reason
		}
		return res, err
	}
	res.Newest, res.Digest, res.Reason = tag, digest, ""
	e, err := Event(app.Image, tag, digest)
	if err != nil {
		return res, err
	}
	return p.journal(ctx, app, res, e)
}

// readBuilt returns what tags point at and when each was built, reading
// the tags earlier polls did not (at most MaxReads, the lexically last
// first) and forgetting those no longer listed.
func (p *Poller) readBuilt(ctx context.Context, app config.Application, tags []string) ([]rollout.Built, error) {
	p.mu.Lock()
	known := p.built[app.Name]
	p.mu.Unlock()
	next := make(map[string]rollout.Built, len(tags))
	var unread []string
	for _, tag := range tags {
		if b, ok := known[tag]; ok {
			next[tag] = b
		} else {
			unread = append(unread, tag)
		}
	}
	slices.Sort(unread)
	slices.Reverse(unread)
	defer func() { // what was read stays read, even when a later read failed
		p.mu.Lock()
		p.built[app.Name] = next
		p.mu.Unlock()
	}()
	for _, tag := range unread[:min(len(unread), MaxReads)] {
		digest, err := p.reg.Resolve(ctx, app.Image, tag)
		if err != nil {
			return nil, upstream(err)
		}
		created, err := p.reg.Created(ctx, app.Image, digest)
		if err != nil {
			return nil, upstream(err)
		}
		next[tag] = rollout.Built{Tag: tag, Digest: digest, Created: created}
	}
	out := make([]rollout.Built, 0, len(next))
	for _, b := range next {
		out = append(out, b)
	}
	return out, nil
}

// state reads what the version decision needs of an application: its
// state and its rollouts in flight. Of an image member of a release set,
// its set's seen as the member's (rollout.MemberState): its pushes are
// the set's, decided against its entries.
func (p *Poller) state(ctx context.Context, app config.Application) (rollout.AppState, []rollout.Rollout, error) {
	name := app.Name
	set, ok := p.cfg.Current().Application(app.MemberOf)
	member := ok && rollout.ImageSet(set)
	if member {
		name = set.Name
	}
	st, err := p.ros.App(ctx, name)
	if err != nil {
		return st, nil, fmt.Errorf("reading application %s: %w", name, err)
	}
	all, err := p.ros.ListInFlight(ctx)
	if err != nil {
		return st, nil, fmt.Errorf("listing rollouts in flight: %w", err)
	}
	var inFlight []rollout.Rollout
	for _, ro := range all {
		if ro.Application == name {
			inFlight = append(inFlight, ro)
		}
	}
	if !member {
		return st, inFlight, nil
	}
	mst, mine := rollout.MemberState(app.Name, st, inFlight)
	mst.LatestRollout = st.LatestRollout // read as the member's (moved)
	return mst, mine, nil
}

// pollSet polls each image member of release set set
// (docs/design/release-sets.md, "Image members"): the member's tags with
// its own version policy, against its entries in the set's state
// (state); each member's newest is fed in as its push, which verify and
// plan take as the set's. A member another replica owns is left to it.
// The set's result sums the members' (Result.Members); a member's error
// does not keep the others from being polled.
func (p *Poller) pollSet(ctx context.Context, set config.Application) (Result, error) {
	cfg := p.cfg.Current()
	var res Result
	var images, newest, digests, ids, reasons []string
	var errs []error
	for _, name := range set.Set.Names() {
		m, ok := cfg.Application(name)
		if !ok || m.Git() != nil {
			continue
		}
		images = append(images, m.Image)
		if !p.o.Owns(m) {
			res.Members = append(res.Members, Result{Application: m.Name, Image: m.Image, Reason: "polled by another replica"})
			continue
		}
		mr, err := p.poll(ctx, m)
		mr.Application, mr.Image, mr.At = m.Name, m.Image, time.Now()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			mr.Reason = err.Error()
		}
		res.Members = append(res.Members, mr)
		res.Tags += mr.Tags
		res.Started = res.Started || mr.Started
		switch {
		case mr.Newest != "":
			newest, digests = append(newest, m.Name+":"+mr.Newest), append(digests, mr.Digest)
			ids = append(ids, mr.EventID)
			if !mr.Started {
				reasons = append(reasons, m.Name+": "+mr.Reason)
			}
		case mr.Reason != "":
			reasons = append(reasons, m.Name+": "+mr.Reason)
		}
	}
	res.Image = strings.Join(images, ", ")
	res.Newest, res.Digest, res.EventID = strings.Join(newest, ","), strings.Join(digests, ","), strings.Join(ids, ",")
	res.Reason = strings.Join(reasons, "; ")
	return res, errors.Join(errs...)
}

// journal appends the push e of what res found.
func (p *Poller) journal(ctx context.Context, app config.Application, res Result, e cloudevents.Event) (Result, error) {
	tag := res.Newest
	res.EventID = e.ID()
	n, err := p.j.Append(ctx, e)
	if err != nil {
		return res, fmt.Errorf("journaling the push of %s of %s: %w", tag, app.Name, err)
	}
	res.Started = n > 0
	if res.Started {
		p.o.Logger.InfoContext(ctx, "poll found a version no webhook brought", "application", app.Name, "tag", tag, "digest", res.Digest, "event_id", e.ID())
	} else {
		res.Reason = fmt.Sprintf("%s was fed in before (event %s)", tag, e.ID())
	}
	return res, nil
}

// pollGit reads app's branch head and journals it as a git push when no
// rollout was started for it.
func (p *Poller) pollGit(ctx context.Context, app config.Application, src config.GitSource) (Result, error) {
	var res Result
	head, err := p.o.Heads.Head(ctx, src)
	if err != nil {
		return res, upstream(err)
	}
	st, inFlight, err := p.state(ctx, app)
	if err != nil {
		return res, err
	}
	ok, reason := rollout.PolledCommit(st, inFlight, src.Branch, head)
	if !ok {
		res.Reason = reason
		return res, nil
	}
	res.Newest, res.Digest = src.Branch+"@"+head[:min(12, len(head))], head
	e, err := GitEvent(src, head, st.DeployedDigest)
	if err != nil {
		return res, err
	}
	return p.journal(ctx, app, res, e)
}

// GitEvent is the push a poll journals for src's branch at head: a git
// host's webhook's event (the changes since before, the deployed commit),
// marked events.SourcePoll, its id derived from what was found.
func GitEvent(src config.GitSource, head, before string) (cloudevents.Event, error) {
	repo := config.DisplayURL(src.URL)
	ref := "refs/heads/" + src.Branch
	h := sha256.Sum256([]byte(repo + "\x00" + ref + "\x00" + head))
	e, err := events.New("poll/"+hex.EncodeToString(h[:16]), "/flotilla/poll", events.TypeGitPushed, events.GitPushed{
		RepoURL: repo, Ref: ref, Branch: src.Branch, Before: before, After: head,
		Sender: events.SourcePoll, Receiver: events.SourcePoll, Source: events.SourcePoll,
	})
	if err != nil {
		return e, err
	}
	e.SetSubject(repo + "#" + ref)
	return e, nil
}

// upstream marks a registry's error as an upstream failure (502 at the
// API), keeping what it wraps (permanent or not).
func upstream(err error) error { return fmt.Errorf("%w (%w)", err, fault.ErrUpstream) }

// Event is the push a poll journals for image:tag at digest: a registry
// webhook's event, marked events.SourcePoll, its id derived from what was
// found, so that finding it again adds nothing to the journal.
func Event(image, tag, digest string) (cloudevents.Event, error) {
	h := sha256.Sum256([]byte(image + "\x00" + tag + "\x00" + digest))
	host, repo, _ := strings.Cut(image, "/")
	e, err := events.New("poll/"+hex.EncodeToString(h[:16]), "/flotilla/poll", events.TypeImagePushed, events.ImagePushed{
		Registry: host, Repository: repo, Tag: tag, Digest: digest,
		Sender: events.SourcePoll, Receiver: events.SourcePoll, Source: events.SourcePoll,
	})
	if err != nil {
		return e, err
	}
	e.SetSubject(image + ":" + tag)
	return e, nil
}

// Last is what the latest poll of each application found.
func (p *Poller) Last() map[string]Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Result, len(p.last))
	for k, v := range p.last {
		out[k] = v
	}
	return out
}

// Run polls every image application with an interval, each on its own
// schedule, until ctx ends. When Options.Changed reports a configuration
// swapped in, the loops of applications removed or changed (image,
// repository, interval) stop and those of applications added or changed
// start; the others keep their schedule.
func (p *Poller) Run(ctx context.Context) error {
	type running struct {
		app    config.Application
		every  time.Duration
		cancel context.CancelFunc
	}
	var wg sync.WaitGroup
	loops := map[string]running{}
	defer func() {
		for _, l := range loops {
			l.cancel()
		}
		wg.Wait()
	}()
	for {
		cfg := p.cfg.Current()
		var changed <-chan struct{}
		if p.o.Changed != nil {
			changed = p.o.Changed()
		}
		want := map[string]bool{}
		for _, app := range cfg.Applications {
			every := cfg.PollInterval(app)
			// A release set's member is polled as its set.
			if every <= 0 || app.Git() != nil && p.o.Heads == nil || app.MemberOf != "" {
				continue
			}
			want[app.Name] = true
			if l, ok := loops[app.Name]; ok {
				if l.every == every && reflect.DeepEqual(l.app, app) {
					continue
				}
				l.cancel()
			}
			lctx, cancel := context.WithCancel(ctx)
			loops[app.Name] = running{app: app, every: every, cancel: cancel}
			wg.Go(func() { p.loop(lctx, app, every) })
		}
		for name, l := range loops {
			if !want[name] {
				l.cancel()
				delete(loops, name)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed: // nil without Options.Changed: never
		}
	}
}

// loop polls app every interval: first within a jitter of the start
// (catching up on what was pushed while flotilla was down), then after
// each Wait.
func (p *Poller) loop(ctx context.Context, app config.Application, every time.Duration) {
	ctx = logctx.With(ctx, "application", app.Name)
	t := time.NewTimer(p.jitter(every))
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A release set of image members: each member's owner polls it
		// (pollSet), its pushes being keyed by its image.
		if rollout.ImageSet(app) || p.o.Owns(app) {
			if _, err := p.Poll(ctx, app.Name); err != nil && ctx.Err() == nil {
				failures++
				p.o.Logger.WarnContext(ctx, "polling the registry failed", "application", app.Name, "image", app.Image,
					"failures", failures, "error", err)
			} else {
				failures = 0
			}
		}
		t.Reset(p.Wait(every, failures))
	}
}

// Wait is how long to wait before the next poll after failures failures
// in a row: the interval, doubled per failure up to MaxBackoff times, plus
// a jitter of up to Jitter of it.
func (p *Poller) Wait(every time.Duration, failures int) time.Duration {
	d := every * time.Duration(min(1<<min(failures, 3), MaxBackoff))
	return d + p.jitter(d)
}

func (p *Poller) jitter(d time.Duration) time.Duration {
	return time.Duration(p.o.Rand() * Jitter * float64(cmp.Or(d, time.Second)))
}
