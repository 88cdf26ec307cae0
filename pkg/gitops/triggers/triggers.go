package triggers

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/kubecd"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Pusher names flotilla as the pusher of a trigger's commit (git.pushed).
const Pusher = "flotilla (KubeCD trigger)"

// Upgrader writes the tags KubeCD's image triggers accept into the
// deployments repository.
type Upgrader struct {
	cfg   config.Provider
	repos Repos
	apps  Applications
	log   *slog.Logger
}

// Applications keeps the applications' state (pkg/state): a push a
// trigger refused is recorded in its release's application, as plan
// records an image application's.
type Applications interface {
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// WithApplications has the upgrader record in each release's application
// the pushes its triggers refused, and why.
func (u *Upgrader) WithApplications(apps Applications) *Upgrader {
	u.apps = apps
	return u
}

// Repos reads and writes a deployments repository.
type Repos interface {
	// Checkout writes the files of r's branch head under dir (empty) and
	// returns the head's commit.
	Checkout(ctx context.Context, r gitops.Repo, dir string) (string, error)
	// Bump commits c on r's branch and pushes it (gitops.Bump).
	Bump(ctx context.Context, r gitops.Repo, c gitops.Change) (gitops.Result, error)
}

// Git is Repos on the repository itself: the head `git ls-remote` lists,
// checked out of a mirror's copy; gitops.Bump.
type Git struct{ Mirror *gitops.Mirror }

// Checkout implements Repos.
func (g Git) Checkout(ctx context.Context, r gitops.Repo, dir string) (string, error) {
	head, err := gitops.Head(ctx, r)
	if err != nil {
		return "", err
	}
	return head, g.Mirror.Checkout(ctx, r, head, dir)
}

// Bump implements Repos.
func (Git) Bump(ctx context.Context, r gitops.Repo, c gitops.Change) (gitops.Result, error) {
	return gitops.Bump(ctx, r, c)
}

// New returns the upgrader of cfg's KubeCD releases; log defaults to none.
func New(cfg config.Provider, repos Repos, log *slog.Logger) *Upgrader {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Upgrader{cfg: cfg, repos: repos, log: log}
}

func (*Upgrader) Name() string       { return "kubecd-triggers" }
func (*Upgrader) Consumes() []string { return []string{events.TypeImageVerified} }

// Handle writes a verified push's tag where the triggers tracking its
// image accept it, and turns the commit into the repository's push.
func (u *Upgrader) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	v, err := events.Decode[events.ImageVerified](e)
	if err != nil {
		return nil, err
	}
	apps := u.cfg.Current().KubeCDTriggered(v.Image)
	if len(apps) == 0 {
		return nil, nil
	}
	// One commit per repository and branch (kubecd.application gives every
	// release the same one).
	var groups [][]config.Application
	for _, a := range apps {
		i := slices.IndexFunc(groups, func(g []config.Application) bool {
			s, t := g[0].Git(), a.Git()
			return config.SameGitRepository(s.URL, t.URL) && s.Branch == t.Branch
		})
		if i < 0 {
			groups = append(groups, []config.Application{a})
			continue
		}
		groups[i] = append(groups[i], a)
	}
	var out []cloudevents.Event
	for _, g := range groups {
		evs, err := u.upgrade(ctx, e, v, g)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, u.record(ctx, e, v, out)
}

// record keeps the skips of out in their applications' state (what `flotilla
// describe application` says of the last push skipped).
func (u *Upgrader) record(ctx context.Context, e cloudevents.Event, v events.ImageVerified, out []cloudevents.Event) error {
	if u.apps == nil {
		return nil
	}
	for _, o := range out {
		if o.Type() != events.TypeRolloutSkipped {
			continue
		}
		p, err := events.Decode[events.RolloutSkipped](o)
		if err != nil {
			return err
		}
		k := rollout.Skipped{Tag: v.Tag, Digest: v.Digest, Source: cmp.Or(v.Source, rollout.SourceWebhook), Outcome: rollout.OutcomeSkipped,
			Reason: p.Reason, At: e.Time().UTC(), EventID: strings.TrimSuffix(e.ID(), "/"+e.Type())}
		if err := u.apps.UpdateApp(ctx, p.Application, func(st *rollout.AppState) error { st.Skip(k); return nil }); err != nil {
			return fmt.Errorf("recording the skip of %s of %s: %w", v.Tag, p.Application, err)
		}
	}
	return nil
}

// edit is one value to write: a release's tagValue in its release file.
type edit struct{ file, release, key string }

// upgrade decides the push for apps (all of one repository and branch) at
// the branch's head, commits what their triggers accept and returns the
// commit's push, or why nothing was committed.
func (u *Upgrader) upgrade(ctx context.Context, e cloudevents.Event, v events.ImageVerified, apps []config.Application) ([]cloudevents.Event, error) {
	src := *apps[0].Git()
	repo := sourceRepo(src)
	skipAll := func(format string, args ...any) ([]cloudevents.Event, error) {
		reason := fmt.Sprintf(format, args...)
		var out []cloudevents.Event
		for _, a := range apps {
			ev, err := skipped(e, v, a.Name, reason)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		return out, nil
	}
	dir, err := os.MkdirTemp("", "flotilla-kubecd-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	head, err := u.repos.Checkout(ctx, repo, dir)
	if fault.IsPermanent(err) {
		return skipAll("KubeCD trigger: reading %s: %v", config.DisplayURL(src.URL), err)
	}
	if err != nil {
		return nil, err
	}
	loaded := map[string]*kubecd.Files{}
	reasons := map[string][]string{}
	var accepted []string
	var edits []edit
	var files []gitops.File
	for _, a := range apps {
		k := a.Git().KubeCD
		if _, ok := loaded[k.EnvironmentsFile]; !ok {
			f, err := kubecd.Load(dir, k.EnvironmentsFile)
			if err != nil {
				u.log.Warn("KubeCD trigger: the files at the branch's head do not load", "commit", head, "error", err)
			}
			loaded[k.EnvironmentsFile] = f
		}
		kf := loaded[k.EnvironmentsFile]
		if kf == nil {
			reasons[a.Name] = append(reasons[a.Name], fmt.Sprintf("KubeCD's files at %s do not load", abbrev(head)))
			continue
		}
		for _, env := range environments(k) {
			en := kf.Environment(env)
			var r *kubecd.Release
			if en != nil {
				r = en.Release(k.Release)
			}
			if r == nil {
				reasons[a.Name] = append(reasons[a.Name], fmt.Sprintf("environment %s has no release %s at %s", env, k.Release, abbrev(head)))
				continue
			}
			imgs, err := kf.Images(dir, en, *r)
			if err != nil {
				reasons[a.Name] = append(reasons[a.Name], err.Error())
				continue
			}
			for _, img := range imgs {
				if !config.SameImage(img.Repository, v.Image) {
					continue
				}
				d, err := img.Decide(v.Tag)
				if err != nil {
					reasons[a.Name] = append(reasons[a.Name], err.Error())
					continue
				}
				if !d.Accept {
					reasons[a.Name] = append(reasons[a.Name], fmt.Sprintf("environment %s: %s", env, d.Reason))
					continue
				}
				accepted = append(accepted, fmt.Sprintf("%s of %s in %s (environment %s): %s", img.TagValue, img.Release, img.File, env, d.Reason))
				ed := edit{img.File, img.Release, img.TagValue}
				if slices.Contains(edits, ed) {
					continue
				}
				edits = append(edits, ed)
				track, tag := img.Track, v.Tag
				files = append(files, gitops.File{Path: img.File, Edit: gitops.KubeCDValue{Release: img.Release, Key: img.TagValue,
					// The branch may have moved since head: the entry's
					// value then is what the track compares.
					Accept: func(current string) bool {
						d, err := kubecd.Image{Track: track, Tag: current}.Decide(tag)
						return err == nil && d.Accept
					}}})
			}
		}
	}
	var out []cloudevents.Event
	if len(files) == 0 {
		for _, a := range apps {
			reason := "no trigger of the release tracks it at " + abbrev(head)
			if rs := reasons[a.Name]; len(rs) > 0 {
				reason = "KubeCD trigger: " + strings.Join(slices.Compact(rs), "; ")
			}
			ev, err := skipped(e, v, a.Name, reason)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		return out, nil
	}
	var names []string
	for _, ed := range edits {
		if !slices.Contains(names, ed.release) {
			names = append(names, ed.release)
		}
	}
	ref := v.Image + ":" + v.Tag
	msg := fmt.Sprintf("flotilla: %s %s (KubeCD trigger)\n\n%s\n\nImage: %s@%s\n", strings.Join(names, ", "), v.Tag, strings.Join(accepted, "\n"), ref, v.Digest)
	res, err := u.repos.Bump(ctx, repo, gitops.Change{App: strings.Join(names, ","), Image: gitops.Image{Repository: v.Image, Tag: v.Tag}, Files: files, Message: msg})
	if fault.IsPermanent(err) {
		return skipAll("KubeCD trigger: committing %s to %s: %v", ref, config.DisplayURL(src.URL), err)
	}
	if err != nil {
		return nil, err
	}
	if !res.Changed {
		return skipAll("KubeCD trigger: branch %s of %s holds %s already (at %s)", src.Branch, config.DisplayURL(src.URL), v.Tag, abbrev(res.Commit))
	}
	u.log.Info("KubeCD trigger: committed a pushed tag", "image", v.Image, "tag", v.Tag, "releases", names, "commit", res.Commit, "files", res.Files)
	url, branchRef := config.DisplayURL(src.URL), "refs/heads/"+src.Branch
	push, err := events.Derive(e, events.TypeGitPushed, res.Commit, events.GitPushed{
		RepoURL: url, Ref: branchRef, Branch: src.Branch, After: res.Commit, ChangedPaths: res.Files,
		Pusher: Pusher, Sender: "kubecd", Receiver: "kubecd",
	})
	if err != nil {
		return nil, err
	}
	push.SetSubject(url + "#" + branchRef)
	return append(out, push), nil
}

// environments are the environments the release is in, once each, sorted.
func environments(k *config.KubeCDSource) []string {
	var out []string
	for _, e := range k.Environments {
		out = append(out, e)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func skipped(e cloudevents.Event, v events.ImageVerified, app, reason string) (cloudevents.Event, error) {
	return events.Derive(e, events.TypeRolloutSkipped, app, events.RolloutSkipped{Application: app, Image: v.Image, Tag: v.Tag, Reason: reason})
}

func abbrev(commit string) string { return commit[:min(12, len(commit))] }

// sourceRepo is the repository of a git source, with its credentials.
func sourceRepo(src config.GitSource) gitops.Repo {
	return gitops.Repo{URL: src.URL, Branch: src.Branch, Auth: gitops.Auth{
		Username: src.Username, Password: src.PasswordValue, Token: src.TokenValue, SSHKeyFile: src.SSHKeyFile,
	}}
}
