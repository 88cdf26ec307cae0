package intake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// What the git push senders (GitHub, GitLab, Gitea/Forgejo, Bitbucket Cloud
// and Server) share.

// gitPushResult finishes the Result of a delivery of one push: a deleted ref
// is ignored; otherwise the push becomes a [TypeGitPushed], with the paths
// the commits changed when the payload lists every commit of the push.
func gitPushResult(d *Delivery, res Result, key string, p events.GitPushed, deleted bool, commits []gitCommitFiles, allListed bool) (Result, error) {
	kind := gitSetRefNames(&p)
	if deleted {
		res.Ignored = fmt.Sprintf("%s delete %s", kind, p.Ref)
		return res, nil
	}
	if allListed {
		p.ChangedPaths = gitChangedPaths(commits)
	}
	e, err := gitPushedEvent(d, key, p, time.Time{})
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// gitFirstHeader returns the first of d's headers that is set, trimmed.
func gitFirstHeader(d *Delivery, headers ...string) string {
	for _, h := range headers {
		if v := strings.TrimSpace(d.Header.Get(h)); v != "" {
			return v
		}
	}
	return ""
}

// gitJSONMediaType checks that d is JSON, or has no Content-Type.
func gitJSONMediaType(d *Delivery, sender string) error {
	mt, err := mediaType(d)
	if err != nil {
		return err
	}
	if mt != "application/json" && mt != "" {
		return fault.Permanent(fmt.Errorf("%w %q: %s sends application/json", ErrUnsupportedMediaType, mt, sender))
	}
	return nil
}

// gitNullSHA tells whether sha is git's null object id (all zeros, SHA-1 or
// SHA-256 length alike), which stands for a ref that does not exist.
func gitNullSHA(sha string) bool {
	return sha != "" && strings.Trim(sha, "0") == ""
}

// gitSetRefNames sets p.Branch or p.Tag from p.Ref and returns the kind of
// the ref: "branch", "tag" or "ref".
func gitSetRefNames(p *events.GitPushed) string {
	if b, ok := strings.CutPrefix(p.Ref, "refs/heads/"); ok {
		p.Branch = b
		return "branch"
	}
	if t, ok := strings.CutPrefix(p.Ref, "refs/tags/"); ok {
		p.Tag = t
		return "tag"
	}
	return "ref"
}

// gitCommitFiles is what a push payload says one commit changed.
type gitCommitFiles struct {
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Modified []string `json:"modified"`
}

// gitChangedPaths is the sorted set of paths the commits added, removed or
// modified; nil when none.
func gitChangedPaths(commits []gitCommitFiles) []string {
	var paths []string
	for _, c := range commits {
		paths = append(paths, c.Added...)
		paths = append(paths, c.Removed...)
		paths = append(paths, c.Modified...)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// gitCount is a count in a push payload: a JSON number, a float with no
// fraction, or a numeric string. null and "" are 0.
type gitCount int

// UnmarshalJSON implements [json.Unmarshaler].
func (c *gitCount) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		*c = 0
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1<<31 || f != float64(int(f)) {
		return fmt.Errorf("count %s is not a whole number", b)
	}
	*c = gitCount(f)
	return nil
}
