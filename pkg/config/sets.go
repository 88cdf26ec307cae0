package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseSet is several git applications promoted as one unit
// (docs/design/release-sets.md): one rollout of the set's commit through
// the waves, its members applied in each cluster in their dependsOn order,
// one member failing rolling the whole set back.
type ReleaseSet struct {
	// Name names the set's rollouts and its application in the API: a DNS
	// label no application has.
	Name string `json:"name"`
	// Applications are the set's members, at least two: git applications
	// of one repository, branch and tags pattern, in one namespace, each in
	// no other set.
	Applications []string `json:"applications"`
	// The set's own rollout fields, as an application's (a member's own
	// are refused: the set's rollout decides for every member).
	//
	// DriftPolicy: what flotilla does when a member's primary runs
	// another image than the set's validated commit renders for it
	// (report, the default, or revert: the set's commit applied again to
	// the drifted clusters, every member).
	DriftPolicy string `json:"driftPolicy"`
	// FreezeWindows hold the set's rollouts only.
	FreezeWindows []FreezeWindow `json:"freezeWindows"`
	// ClusterSelector limits the set to the clusters whose labels it
	// matches (default: every cluster of the fleet).
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector"`
	// OnNewVersion: what a new commit of the set does to its rollout in
	// flight: supersede (the default) or queue.
	OnNewVersion string `json:"onNewVersion"`
	// Poll overrides fleet.poll for the set's branch.
	Poll *Poll `json:"poll"`
}

// setFields are the rollout fields a release set has of its own.
var setFields = []string{"driftPolicy", "freezeWindows", "clusterSelector", "onNewVersion", "poll"}

// Application is the application s's fields (the set's own rollout
// fields, validated as an application's) make, named after the set.
func (s ReleaseSet) Application() Application {
	return Application{
		Name: s.Name, DriftPolicy: s.DriftPolicy, FreezeWindows: s.FreezeWindows, ClusterSelector: s.ClusterSelector,
		OnNewVersion: cmpOr(s.OnNewVersion, OnNewVersionSupersede), Poll: s.Poll,
	}
}

// DependencyReference names an application applied (and ready) before the
// one declaring it, as Flux's Kustomization dependsOn does: a member of the
// same release set.
type DependencyReference struct {
	// Name is the application's name. Required.
	Name string `json:"name"`
}

// KindJob is the workload kind of a member of a release set that runs to
// completion (a database migration): it gets no canary; its Jobs must
// complete before the members depending on it are applied.
const KindJob = "Job"

// SetSpec is what the configuration in force holds on a release set's
// application (Application.Set), built by Load from the set and its
// members.
type SetSpec struct {
	// Members are the members in the order they are applied: each after
	// those it depends on, ties in the set's order.
	Members []SetMember
}

// SetMember is one member of a release set.
type SetMember struct {
	Name string
	// Job: the member's workload is a Job (KindJob), no canary.
	Job bool
	// Image is an image member's image repository ("" for a git member):
	// a set with both kinds is mixed (docs/design/release-sets.md, "Git
	// and image members").
	Image string
}

// Mixed tells whether the set has both git and image members: its version
// is a tuple whose git members' entries hold one commit.
func (s *SetSpec) Mixed() bool {
	git := slices.ContainsFunc(s.Members, func(m SetMember) bool { return m.Image == "" })
	return git && slices.ContainsFunc(s.Members, func(m SetMember) bool { return m.Image != "" })
}

// Names are the members' names, in their order.
func (s *SetSpec) Names() []string {
	out := make([]string, len(s.Members))
	for i, m := range s.Members {
		out[i] = m.Name
	}
	return out
}

// SetOf names the release set application name is a member of ("" when
// none).
func (c *Config) SetOf(application string) string {
	for _, s := range c.ReleaseSets {
		if slices.Contains(s.Applications, application) {
			return s.Name
		}
	}
	return ""
}

// releaseSetsBeforeDefaults refuses what a Job member declares that only a
// canary would use: defaults fill those fields, so they are checked as the
// file gives them.
func releaseSetsBeforeDefaults(c *Config) []Problem {
	var ps []Problem
	for i, a := range c.Applications {
		if a.Workload.Kind != KindJob {
			continue
		}
		p := fmt.Sprintf("applications[%d]", i)
		for _, f := range []struct {
			name string
			set  bool
		}{{"delivery", !reflect.ValueOf(a.Delivery).IsZero()}, {"service", !reflect.ValueOf(a.Service).IsZero()}, {"validation", a.Validation != nil}} {
			if f.set {
				ps = append(ps, Problem{Path: p + "." + f.name, Message: "a Job member of a release set has no canary: its Jobs run to completion before its dependents are applied"})
			}
		}
	}
	return ps
}

// releaseSets checks the sets and every application's dependsOn.
func (v *validator) releaseSets(c *Config) {
	index := map[string]int{}
	for i, a := range c.Applications {
		index[a.Name] = i
	}
	setOf := map[string]string{}
	seen := map[string]string{}
	for i, s := range c.ReleaseSets {
		p := fmt.Sprintf("releaseSets[%d]", i)
		v.name(p, "release set", s.Name, seen)
		if _, ok := index[s.Name]; ok && s.Name != "" {
			v.addf(p+".name", "%q is an application's name: the set's rollouts are named after it", s.Name)
		}
		if s.DriftPolicy != "" {
			v.oneOf(p+".driftPolicy", "driftPolicy", s.DriftPolicy, DriftPolicies)
		}
		if s.OnNewVersion != "" {
			v.oneOf(p+".onNewVersion", "onNewVersion", s.OnNewVersion, OnNewVersions)
		}
		v.freezeWindows(p+".freezeWindows", s.FreezeWindows)
		v.poll(p+".poll", s.Poll)
		v.clusterSelector(p+".clusterSelector", "release set", s.Application())
		if len(s.Applications) < 2 {
			v.addf(p+".applications", "a release set has at least two members")
		}
		var first, firstGit *Application
		canaried := false
		for j, m := range s.Applications {
			mp := fmt.Sprintf("%s.applications[%d]", p, j)
			k, ok := index[m]
			switch {
			case slices.Index(s.Applications, m) != j:
				v.addf(mp, "%q is listed twice", m)
				continue
			case !ok:
				v.addf(mp, "no application %q is configured", m)
				continue
			case setOf[m] != "":
				v.addf(mp, "%q is a member of release set %s already: an application is in one set", m, setOf[m])
				continue
			}
			setOf[m] = s.Name
			a := c.Applications[k]
			ap := fmt.Sprintf("applications[%d]", k)
			if g := a.Git(); g == nil {
				v.imageMember(c, ap, a, s)
			} else if g.KubeCD != nil {
				v.addf(mp, "%q is a release of KubeCD's files: a release set's members are the file's own applications", m)
			}
			canaried = canaried || a.Workload.Kind != KindJob
			v.setMemberFields(ap, a)
			if first == nil {
				first = &c.Applications[k]
			}
			g := a.Git()
			if fg := firstGit; g != nil && fg != nil {
				if fg := fg.Git(); !SameGitRepository(g.URL, fg.URL) || g.Branch != fg.Branch || g.Tags != fg.Tags {
					v.addf(mp, "%q follows %s (branch %s, tags %q), %s follows %s (branch %s, tags %q): a release set's git members are of one repository, branch and tags pattern",
						m, DisplayURL(g.URL), g.Branch, g.Tags, firstGit.Name, DisplayURL(fg.URL), fg.Branch, fg.Tags)
				}
			}
			if g != nil && firstGit == nil {
				firstGit = &c.Applications[k]
			}
			if a.Namespace != first.Namespace {
				v.addf(ap+".namespace", "%q, %s's is %q: a release set's members are in one namespace (the set is judged by its canaries there)", a.Namespace, first.Name, first.Namespace)
			}
		}
		if first != nil && !canaried {
			v.addf(p+".applications", "no member has a Deployment or DaemonSet workload: a set is judged by its members' canaries")
		}
	}
	for k, a := range c.Applications {
		ap := fmt.Sprintf("applications[%d]", k)
		if a.Workload.Kind == KindJob && setOf[a.Name] == "" {
			v.addf(ap+".workload.kind", "Job is for a member of a release set (releaseSets); an application on its own is a Deployment or DaemonSet")
		}
		for j, d := range a.DependsOn {
			dp := fmt.Sprintf("%s.dependsOn[%d].name", ap, j)
			_, known := index[d.Name]
			switch {
			case setOf[a.Name] == "":
				v.addf(dp, "%s is in no release set: dependsOn orders the members of a set (releaseSets)", a.Name)
			case d.Name == "":
				v.addf(dp, "required: the member applied before %s", a.Name)
			case d.Name == a.Name:
				v.addf(dp, "%s depends on itself", a.Name)
			case !known:
				v.addf(dp, "no application %q is configured", d.Name)
			case setOf[d.Name] != setOf[a.Name]:
				v.addf(dp, "%q is not a member of release set %s", d.Name, setOf[a.Name])
			case slices.IndexFunc(a.DependsOn, func(x DependencyReference) bool { return x.Name == d.Name }) != j:
				v.addf(dp, "%q is listed twice", d.Name)
			}
		}
	}
	for _, s := range c.ReleaseSets {
		if _, err := setOrder(c, s); err != nil {
			v.addf(fmt.Sprintf("applications[%d].dependsOn", index[err.from]), "%v", err)
		}
	}
}

// imageMember refuses what an image member a of set s (the application at
// ap) cannot be in this slice (docs/design/release-sets.md, "Image
// members"). Either executor runs it: the PipelineRun's members param
// carries image members to apply-canary as the embedded run's does.
func (v *validator) imageMember(c *Config, ap string, a Application, s ReleaseSet) {
	if a.Workload.Kind == KindJob {
		v.addf(ap+".workload.kind", "%s is an image member of a release set: its workload is a Deployment or DaemonSet (a Job member is a git application)", a.Name)
	}
	if a.GitOps != nil {
		v.addf(ap+".gitops", "%s is an image member of a release set: the set's run sets its image in the clusters (gitops is not for a member)", a.Name)
	}
	for _, o := range s.Applications {
		if o == a.Name {
			break
		}
		if b, ok := c.Application(o); ok && b.Git() == nil && SameImage(b.Image, a.Image) {
			v.addf(ap+".image", "%s, %s's image too: a push of an image names one member of a release set", a.Image, o)
			break
		}
	}
}

// setMemberFields refuses a member's fields that decide about a rollout:
// the set's rollout decides for every member, with the set's own field
// where it has one (setFields).
func (v *validator) setMemberFields(path string, a Application) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"freezeWindows", len(a.FreezeWindows) > 0},
		{"clusterSelector", a.ClusterSelector != nil},
		{"onNewVersion", a.OnNewVersion != OnNewVersionSupersede},
		{"poll", a.Poll != nil},
		{"driftPolicy", a.DriftPolicy != ""},
	} {
		switch {
		case !f.set:
		case slices.Contains(setFields, f.name):
			v.addf(path+"."+f.name, "%s is a member of a release set: the set's rollout decides for every member (set releaseSets[].%s)", a.Name, f.name)
		default:
			v.addf(path+"."+f.name, "%s is a member of a release set: the set's rollout decides for every member (not per member yet)", a.Name)
		}
	}
}

// cycleError is a dependsOn cycle among a set's members.
type cycleError struct {
	from  string
	cycle []string
}

func (e *cycleError) Error() string {
	return "dependsOn cycle " + strings.Join(e.cycle, " -> ")
}

// setOrder orders s's members so each comes after those it depends on,
// ties in the set's order (Kahn's algorithm, smallest index first); a
// cycle is an error naming it. Members or dependencies that are not
// configured are left to the other checks.
func setOrder(c *Config, s ReleaseSet) ([]string, *cycleError) {
	deps := map[string][]string{}
	members := map[string]bool{}
	for _, m := range s.Applications {
		members[m] = true
	}
	for _, m := range s.Applications {
		a, ok := c.Application(m)
		if !ok {
			continue
		}
		for _, d := range a.DependsOn {
			if members[d.Name] && d.Name != m && !slices.Contains(deps[m], d.Name) {
				deps[m] = append(deps[m], d.Name)
			}
		}
	}
	done := map[string]bool{}
	var out []string
	for len(out) < len(members) {
		progressed := false
		for _, m := range s.Applications {
			if done[m] || !members[m] {
				continue
			}
			ready := true
			for _, d := range deps[m] {
				ready = ready && done[d]
			}
			if ready {
				done[m], progressed = true, true
				out = append(out, m)
				break
			}
		}
		if !progressed {
			return nil, findCycle(s.Applications, deps, done)
		}
	}
	return out, nil
}

// findCycle follows the dependencies of the first member not done until
// one repeats.
func findCycle(order []string, deps map[string][]string, done map[string]bool) *cycleError {
	var start string
	for _, m := range order {
		if !done[m] {
			start = m
			break
		}
	}
	path := []string{start}
	for at := start; ; {
		next := ""
		for _, d := range deps[at] {
			if !done[d] {
				next = d
				break
			}
		}
		if i := slices.Index(path, next); i >= 0 {
			cycle := append(slices.Clone(path[i:]), next)
			return &cycleError{from: cycle[0], cycle: cycle}
		}
		path, at = append(path, next), next
	}
}

// foldReleaseSets appends each set's application to c's applications (a
// valid c), named after the set, in the members' namespace, judged by its
// lead (the first member in order with a canary): the lead's workload,
// service and delivery, with a deadline that is the sum of the members'
// (they are applied one after another). A set of git members has as its
// source the members' repository tracking every member's paths; a set of
// image members has no source (rollout.ImageSet: its version is one
// digest per member, each pushed to its member's image). A set of git and
// image members has its first git member's source, whichever member leads.
func foldReleaseSets(c *Config) {
	for _, s := range c.ReleaseSets {
		order, err := setOrder(c, s)
		if err != nil {
			continue // validated: not reached
		}
		spec := &SetSpec{}
		var lead, firstGit *Application
		var tracked []string
		var deadline time.Duration
		for _, m := range order {
			a, _ := c.Application(m)
			job := a.Workload.Kind == KindJob
			sm := SetMember{Name: m, Job: job}
			if a.Git() == nil {
				sm.Image = a.Image
			}
			spec.Members = append(spec.Members, sm)
			if !job && lead == nil {
				lead = &a
			}
			deadline += a.Delivery.StepDeadline()
			if g := a.Git(); g != nil {
				if firstGit == nil {
					firstGit = &a
				}
				for _, p := range g.TrackedPaths("{cluster}") {
					if !slices.Contains(tracked, p) {
						tracked = append(tracked, p)
					}
				}
			}
		}
		if lead == nil {
			continue // validated: not reached
		}
		set := s.Application()
		set.Track, set.Namespace = lead.Track, lead.Namespace
		if firstGit != nil {
			// The git members' repository, branch and track, an image
			// lead's too: it has no source of its own.
			g := *firstGit.Git()
			g.Paths, g.Helm, g.Render, g.AllowedImages = tracked, nil, DefaultGitRender, nil
			set.Source, set.Track = &Source{Git: &g}, firstGit.Track
		}
		set.Workload, set.Service, set.Delivery, set.Set = lead.Workload, lead.Service, lead.Delivery, spec
		set.Delivery.Deadline = Duration{deadline}
		c.Applications = append(c.Applications, set)
	}
	for i := range c.Applications {
		c.Applications[i].MemberOf = c.SetOf(c.Applications[i].Name)
	}
}
