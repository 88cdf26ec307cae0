package verify

import (
	"context"
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// GitRepos confirms a git push against the repository itself
// (pkg/gitops.Mirror, behind pkg/app): commit is on ref (a branch's
// history, or what a tag names). It returns the paths the push changed
// since before. A push the repository does not confirm is a permanent
// error saying why.
type GitRepos interface {
	VerifyPush(ctx context.Context, src config.GitSource, ref, before, commit string) (changed []string, err error)
}

// WithGit has verify act on git pushes to the repositories cfg's git
// applications follow, confirming each with repos.
func (f *Function) WithGit(repos GitRepos, cfg config.Provider) *Function {
	f.git, f.cfg = repos, cfg
	return f
}

// gitPushed verifies a git push: for the applications following the
// repository and the pushed branch (or a tag their pattern matches), the
// commit must be on the branch (or the tag's); the applications whose
// tracked paths the push changed (any push of a matching tag counts) are
// named in git.verified, the others skipped with the paths it changed.
func (f *Function) gitPushed(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	p, err := events.Decode[events.GitPushed](e)
	if err != nil || f.git == nil {
		return nil, err
	}
	reject := func(reason string) ([]cloudevents.Event, error) {
		out, err := events.Derive(e, events.TypeGitRejected, "", events.GitRejected{RepoURL: p.RepoURL, Ref: p.Ref, Commit: p.After, Reason: reason})
		return []cloudevents.Event{out}, err
	}
	var apps []config.Application
	for _, a := range f.cfg.Current().Applications {
		// A release set's member rolls out with its set (its
		// application follows the repository too), never alone.
		if g := a.Git(); g != nil && a.MemberOf == "" && config.SameGitRepository(g.URL, p.RepoURL) {
			apps = append(apps, a)
		}
	}
	if len(apps) == 0 {
		return reject(fmt.Sprintf("repository %s is not followed by any application", p.RepoURL))
	}
	if p.After == "" {
		return reject("the push names no commit")
	}
	v := events.GitVerified{RepoURL: p.RepoURL, Ref: p.Ref, Branch: p.Branch, Tag: p.Tag, Commit: p.After, Pusher: p.Pusher, Source: p.Source}
	var out []cloudevents.Event
	skip := func(app, reason string) error {
		ev, err := events.Derive(e, events.TypeRolloutSkipped, app, events.RolloutSkipped{Application: app, Image: p.RepoURL, Tag: refName(p), Reason: reason})
		out = append(out, ev)
		return err
	}
	var verified bool
	var changed []string
	for _, a := range apps {
		g := a.Git()
		switch {
		case p.Branch != "" && p.Branch == g.Branch, p.Tag != "" && g.TagMatches(p.Tag):
		case p.Tag != "" && g.Tags == "":
			if err := skip(a.Name, fmt.Sprintf("a push of tag %s: the application follows branch %s (it sets no tags pattern)", p.Tag, g.Branch)); err != nil {
				return nil, err
			}
			continue
		case p.Tag != "":
			if err := skip(a.Name, fmt.Sprintf("tag %s does not match the application's tags pattern %s", p.Tag, g.Tags)); err != nil {
				return nil, err
			}
			continue
		default:
			if err := skip(a.Name, fmt.Sprintf("a push to %s: the application follows branch %s", p.Ref, g.Branch)); err != nil {
				return nil, err
			}
			continue
		}
		if !verified {
			changed, err = f.git.VerifyPush(ctx, *g, p.Ref, p.Before, p.After)
			if fault.IsPermanent(err) {
				return reject(err.Error())
			}
			if err != nil {
				return nil, err
			}
			verified = true
		}
		if p.Tag != "" {
			v.Applications = append(v.Applications, a.Name)
			continue
		}
		clusters := f.changedClusters(a, changed)
		if len(clusters) == 0 {
			if err := skip(a.Name, fmt.Sprintf("the push changes nothing the application tracks (it changed %s)", listPaths(changed))); err != nil {
				return nil, err
			}
			continue
		}
		if v.Clusters == nil {
			v.Clusters = map[string][]string{}
		}
		v.Applications, v.Clusters[a.Name] = append(v.Applications, a.Name), clusters
	}
	if len(v.Applications) == 0 {
		return out, nil
	}
	v.ChangedPaths, v.Abbrev = changed, v.Commit[:min(12, len(v.Commit))]
	ev, err := events.Derive(e, events.TypeGitVerified, "", v)
	return append(out, ev), err
}

// changedClusters lists the clusters a targets whose objects are rendered
// from a changed path.
func (f *Function) changedClusters(a config.Application, changed []string) []string {
	var out []string
	for _, c := range f.cfg.Current().Fleet.Clusters {
		if a.Targets(c) && touches(changed, a.Git().TrackedPaths(c.Name)) {
			out = append(out, c.Name)
		}
	}
	return out
}

// touches tells whether a changed path is one of tracked or lies under one.
func touches(changed, tracked []string) bool {
	for _, c := range changed {
		for _, t := range tracked {
			t = strings.Trim(t, "/")
			if t == "" || t == "." || c == t || strings.HasPrefix(c, t+"/") {
				return true
			}
		}
	}
	return false
}

// listPaths names the paths for a message, at most five.
func listPaths(ps []string) string {
	switch {
	case len(ps) == 0:
		return "no file"
	case len(ps) > 5:
		return fmt.Sprintf("%s and %d more", strings.Join(ps[:5], ", "), len(ps)-5)
	}
	return strings.Join(ps, ", ")
}

// refName is the branch or tag pushed.
func refName(p events.GitPushed) string {
	if p.Tag != "" {
		return p.Tag
	}
	if p.Branch != "" {
		return p.Branch
	}
	return p.Ref
}
