package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
)

// timelineTypes are the events the report's timeline shows.
var timelineTypes = map[string]string{
	events.TypeImagePushed:            "pushed",
	events.TypeImageRejected:          "push rejected",
	events.TypeRolloutStarted:         "rollout started",
	events.TypeRolloutSkipped:         "rollout skipped",
	events.TypeRolloutSuperseded:      "rollout superseded",
	events.TypeRolloutQueued:          "rollout queued",
	events.TypeWaveStarted:            "wave started",
	events.TypeWaveSucceeded:          "wave succeeded",
	events.TypeWaveBaked:              "wave baked",
	events.TypeClusterSucceeded:       "cluster succeeded",
	events.TypeClusterFailed:          "cluster failed",
	events.TypeClusterReverted:        "cluster rolled back",
	events.TypeRolloutSucceeded:       "rollout succeeded",
	events.TypeRolloutFailed:          "rollout failed",
	events.TypeRolloutRolledBack:      "rollout rolled back",
	events.TypeRolloutRollbackFailed:  "rollback failed",
	events.TypeWaveApprovalRequested:  "approved",
	events.TypeRolloutPauseRequested:  "paused",
	events.TypeRolloutResumeRequested: "resumed",
	events.TypeClusterDeadline:        "deadline passed",
	events.TypePipelineRunRequested:   "cluster applying", // "cluster reverting" for a revert (labelOf)
}

// labelOf is what the timeline calls e, false for an event it leaves out.
func labelOf(e cloudevents.Event) (string, bool) {
	label, ok := timelineTypes[e.Type()]
	if ok && e.Type() == events.TypePipelineRunRequested {
		if r, err := events.Decode[events.PipelineRunRequested](e); err == nil && r.Purpose == events.PurposeRevert {
			label = "cluster reverting"
		}
	}
	return label, ok
}

// report writes the scenario's timeline (virtual time, from the push) and
// its waves x clusters table: each cluster's version and its last state.
func (s *scenario) report(w io.Writer, name string, failure error) {
	en := s.en
	origin := s.pushedAt
	if origin.IsZero() {
		origin = en.start
	}
	status := "passed"
	if failure != nil {
		status = "FAILED"
	}
	fmt.Fprintf(w, "\n== %s (%s; virtual %s, wall %s)\n", name, status,
		en.clock.Now().Sub(en.start).Round(time.Second), time.Since(s.wall).Round(time.Millisecond))
	fmt.Fprintln(w, "timeline (virtual time after the push):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	waves := map[string][]string{} // a rollout's waves' names, by its id
	done := decided{}
	for _, x := range en.timeline {
		label, ok := labelOf(x.e)
		if !ok || done.stale(x.e) {
			continue
		}
		d := detail(x.e.Data())
		if i, ok := waveIndex(x.e.Data()); ok {
			id := events.RolloutID(x.e)
			if _, seen := waves[id]; !seen && id != "" {
				if ro, err := en.srv.Rollouts().Get(s.ctx, id); err == nil {
					for _, wv := range ro.Waves {
						waves[id] = append(waves[id], wv.Name)
					}
				}
			}
			if i < len(waves[id]) {
				d = strings.TrimSpace("wave=" + waves[id][i] + " " + d)
			}
		}
		fmt.Fprintf(tw, "  +%s\t%s\t%s\t%s\n", x.at.Sub(origin).Round(time.Second), x.at.Format("Mon 15:04"), label, d)
	}
	tw.Flush()
	reverted := en.reverted()
	if len(reverted) > 0 {
		fmt.Fprintf(w, "rollback order: %s\n", strings.Join(reverted, ", "))
	}
	fmt.Fprintln(w, "waves x clusters:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  wave\tcluster\tversion\tstate")
	ro, err := en.latest(s.ctx)
	seen := map[string]bool{}
	if err == nil {
		fmt.Fprintf(w, "rollout %s of %s %s: %s%s\n", ro.ID, ro.Application, ro.Tag, ro.Phase, suffix(cmpOr(ro.Waiting, ro.Reason)))
		if m := s.members(ro.Application); m != "" {
			fmt.Fprintf(w, "members: %s\n", m)
		}
		if len(ro.Versions) > 0 {
			// A release set whose version is a tuple (of image members, or of
			// git and image members): one version per member.
			fmt.Fprintf(w, "versions: %s\nprevious: %s\n", ro.Versions.Describe(), cmpOr(ro.PreviousVersions.Describe(), "-"))
		}
		for _, wv := range ro.Waves {
			for _, c := range wv.Clusters {
				v, _ := en.fleet.Version(c.Name, ro.Application)
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", wv.Name, c.Name, v, c.Phase)
				seen[c.Name] = true
			}
		}
	}
	for _, c := range s.cfg.Fleet.Clusters {
		if !seen[c.Name] {
			v, _ := en.fleet.Version(c.Name, s.application())
			fmt.Fprintf(tw, "  -\t%s\t%s\t-\n", c.Name, v)
		}
	}
	tw.Flush()
}

// members are release set app's members in the order each cluster
// applies them, a Job member marked (as `flotilla describe rollout`
// prints them); "" for an application.
func (s *scenario) members(app string) string {
	a, ok := s.cfg.Application(app)
	if !ok || a.Set == nil {
		return ""
	}
	var out []string
	for _, m := range a.Set.Members {
		if m.Job {
			out = append(out, m.Name+" (job)")
		} else {
			out = append(out, m.Name)
		}
	}
	return strings.Join(out, " -> ")
}

// decided are the steps a deadline can no longer decide, as the timeline
// has them so far: a cluster's apply once it succeeded or failed (or its
// rollout failed), its revert once it was rolled back, and every step of
// an ended rollout. Keys: rollout id, and rollout/cluster/purpose.
type decided map[string]bool

// stale notes what e decided and tells whether e is a deadline that
// decided nothing: its step had its verdict before it passed (a cluster
// Flagger promoted at +30s still has its timer fire at +10m, and observe
// drops it). The timeline leaves such a deadline out: it read as if the
// cluster had timed out.
func (d decided) stale(e cloudevents.Event) bool {
	switch e.Type() {
	case events.TypeClusterSucceeded, events.TypeClusterFailed, events.TypeClusterReverted:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return false
		}
		purpose := events.PurposeApply
		if e.Type() == events.TypeClusterReverted {
			purpose = events.PurposeRevert
		}
		d[cmpOr(r.RolloutID, events.RolloutID(e))+"/"+r.Cluster+"/"+purpose] = true
	case events.TypeRolloutFailed:
		d[events.RolloutID(e)+"/"+events.PurposeApply] = true
	case events.TypeRolloutSucceeded, events.TypeRolloutRolledBack, events.TypeRolloutRollbackFailed, events.TypeRolloutSuperseded:
		d[events.RolloutID(e)] = true
	case events.TypeClusterDeadline:
		dl, err := events.Decode[events.ClusterDeadline](e)
		if err != nil {
			return false
		}
		purpose := cmpOr(dl.Purpose, events.PurposeApply)
		return d[dl.RolloutID] || d[dl.RolloutID+"/"+purpose] || d[dl.RolloutID+"/"+dl.Cluster+"/"+purpose]
	}
	return false
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// detail is the payload's cluster, wave and reason, when it has them.
func detail(data []byte) string {
	s := string(data)
	var parts []string
	for _, k := range []string{"cluster", "tag", "reason", "user"} {
		if v := field(s, k); v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// waveIndex reads the wave index of a payload that has one (a wave's
// events, an approval, a cluster's run).
func waveIndex(data []byte) (int, bool) {
	var p struct {
		Wave *int `json:"wave"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Wave == nil || *p.Wave < 0 {
		return 0, false
	}
	return *p.Wave, true
}

// field reads a string field of a JSON object, crudely (no decoding of
// every payload type).
func field(s, k string) string {
	i := strings.Index(s, `"`+k+`":"`)
	if i < 0 {
		return ""
	}
	rest := s[i+len(k)+4:]
	j := strings.Index(rest, `"`)
	if j < 0 {
		return ""
	}
	v := rest[:j]
	if len(v) > 80 {
		v = v[:77] + "..."
	}
	return v
}
