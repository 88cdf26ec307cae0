package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Built is a tag as a poll read it: the digest it points at and when its
// image was built (zero: its config does not say).
type Built struct {
	Tag     string
	Digest  string
	Created time.Time
}

// PolledNewest is Polled for track Newest, which follows when images were
// built: of imgs, the most recently built one app would roll out now that
// no rollout was started for, or why none (found false). A tag a rollout
// was started for (LatestTag) and what was built before it are not taken
// again: a build that failed is not fed in at every poll.
func PolledNewest(app config.Application, st AppState, inFlight []Rollout, imgs []Built) (b Built, found bool, reason string, err error) {
	var since time.Time // when the build a rollout was started for last was built
	for _, img := range imgs {
		if img.Tag == st.LatestTag {
			since = img.Created
		}
	}
	byBuilt := slices.Clone(imgs)
	slices.SortFunc(byBuilt, func(a, b Built) int { return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Tag, b.Tag)) })
	for _, img := range byBuilt {
		if img.Created.IsZero() || img.Tag == st.LatestTag || !since.IsZero() && !img.Created.After(since) {
			continue
		}
		if slices.ContainsFunc(inFlight, func(r Rollout) bool {
			return (r.Phase == Progressing || r.Phase == Queued) && r.Tag == img.Tag && r.Digest == img.Digest
		}) {
			continue
		}
		d, err := DecideVersion(app, st, inFlight, events.ImageVerified{Tag: img.Tag, Digest: img.Digest, Created: img.Created})
		if err != nil {
			return Built{}, false, "", err
		}
		if d.Accept {
			return img, true, "", nil
		}
	}
	base := cmp.Or(st.LatestTag, st.DeployedTag)
	if base == "" {
		return Built{}, false, fmt.Sprintf("none of the %d tags read is a build the application takes", len(imgs)), nil
	}
	return Built{}, false, fmt.Sprintf("none of the %d tags read was built after %s that the application takes", len(imgs), base), nil
}

// PolledMoved says whether the deployed tag, which a poll read pointing at
// img.Digest, rolls out again: pushed again with a new digest (rebuilt),
// as DecideVersion takes a webhook's push of it. latest is the newest
// rollout started for the tag (st.LatestRollout, nil when another tag's
// or the deployed one's): a build that failed is not fed in at every poll.
func PolledMoved(app config.Application, st AppState, inFlight []Rollout, img Built, latest *Rollout) (bool, string, error) {
	switch {
	case app.Git() != nil || st.DeployedTag == "" || st.DeployedDigest == "" || img.Tag != st.DeployedTag:
		return false, "", nil
	case img.Digest == st.DeployedDigest:
		return false, fmt.Sprintf("%s points at the deployed digest", img.Tag), nil
	case latest != nil && latest.Tag == img.Tag && latest.Digest == img.Digest:
		return false, fmt.Sprintf("%s's new digest %s was rolled out before (rollout %s, %s)", img.Tag, img.Digest, latest.ID, latest.Phase), nil
	}
	d, err := DecideVersion(app, st, inFlight, events.ImageVerified{Tag: img.Tag, Digest: img.Digest, Created: img.Created})
	if err != nil || !d.Accept {
		return false, d.Reason, err
	}
	return true, d.Reason, nil
}
