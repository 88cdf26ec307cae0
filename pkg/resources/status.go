package resources

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Apps is what flotilla knows of each application (pkg/state).
type Apps interface {
	App(ctx context.Context, name string) (rollout.AppState, error)
}

// Rollouts reads a rollout (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
}

// Journal wakes the statuses up as it grows (pkg/bus): an application's
// state changes with the events its functions commit.
type Journal interface {
	Changed() <-chan struct{}
}

// StatusOptions configure RunStatus.
type StatusOptions struct {
	Apps     Apps     // Required.
	Rollouts Rollouts // Required.
	Journal  Journal  // [none: the statuses follow the resources and the configuration alone, and every 30 s]
	// Every bounds how often the statuses are refreshed [time.Second].
	Every time.Duration
}

// fieldManager owns the status fields flotilla writes (server-side apply).
const fieldManager = "flotilla"

// changing is what the live configuration may offer: a wake-up at its
// next swap (config.Live).
type changing interface {
	Changed() <-chan struct{}
}

// RunStatus keeps each resource's status current until ctx ends: after
// each Build, each swap of the configuration and each growth of the
// journal, at most once per StatusOptions.Every. A status that cannot be
// written is logged and written at the next refresh.
func (s *Source) RunStatus(ctx context.Context, o StatusOptions) error {
	every := cmp.Or(o.Every, time.Second)
	for {
		s.writeStatuses(ctx, o)
		var liveChanged, journal <-chan struct{}
		if l, ok := s.o.Live.(changing); ok {
			liveChanged = l.Changed()
		}
		if o.Journal != nil {
			journal = o.Journal.Changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.status:
		case <-liveChanged:
		case <-journal:
		case <-time.After(30 * time.Second):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// writeStatuses applies the status of each resource judged whose status
// differs from what it should be.
func (s *Source) writeStatuses(ctx context.Context, o StatusOptions) {
	cur := s.o.Live.Current()
	s.mu.Lock()
	verdicts, built, refusal := maps.Clone(s.verdicts), s.built, s.refusal
	s.mu.Unlock()
	for _, u := range s.list() {
		k := key{kindApplication, u.GetNamespace(), u.GetName()}
		v, ok := verdicts[k]
		if !ok || v.generation != u.GetGeneration() {
			continue // not judged yet: the next Build does
		}
		var had v1alpha1.ApplicationStatus
		if err := fromMap(u.Object["status"], &had); err != nil {
			had = v1alpha1.ApplicationStatus{} // unreadable: written over
		}
		want, err := desired(ctx, o, had, v, cur, built, refusal)
		if err != nil {
			s.o.Logger.Warn("application resource status: reading the application's state", "resource", k.String(), "error", err)
			continue
		}
		if same, err := equalJSON(had, want); err != nil || same {
			continue
		}
		if err := s.apply(ctx, k, want); err != nil {
			s.o.Logger.Warn("application resource status: writing it", "resource", k.String(), "error", err)
		}
	}
	for _, u := range s.listClusters() {
		k := key{kindCluster, u.GetNamespace(), u.GetName()}
		v, ok := verdicts[k]
		if !ok || v.generation != u.GetGeneration() {
			continue
		}
		var had v1alpha1.ClusterStatus
		if err := fromMap(u.Object["status"], &had); err != nil {
			had = v1alpha1.ClusterStatus{}
		}
		want := desiredCluster(had, v, ClusterSource(k.namespace, k.name), cur, built, refusal)
		if same, err := equalJSON(had, want); err != nil || same {
			continue
		}
		if err := s.apply(ctx, k, want); err != nil {
			s.o.Logger.Warn("cluster resource status: writing it", "resource", k.String(), "error", err)
		}
	}
	for _, u := range s.listPolicies() {
		k := key{kindWavePolicy, u.GetNamespace(), u.GetName()}
		v, ok := verdicts[k]
		if !ok || v.generation != u.GetGeneration() {
			continue
		}
		var had v1alpha1.WavePolicyStatus
		if err := fromMap(u.Object["status"], &had); err != nil {
			had = v1alpha1.WavePolicyStatus{}
		}
		want := desiredWavePolicy(had, v, cur, built, refusal)
		if same, err := equalJSON(had, want); err != nil || same {
			continue
		}
		if err := s.apply(ctx, k, want); err != nil {
			s.o.Logger.Warn("wave policy resource status: writing it", "resource", k.String(), "error", err)
		}
	}
}

// desiredWavePolicy is the status of a WavePolicy resource whose
// generation's verdict is v.
func desiredWavePolicy(had v1alpha1.WavePolicyStatus, v verdict, cur, built *config.Config, refusal string) v1alpha1.WavePolicyStatus {
	want := v1alpha1.WavePolicyStatus{ObservedGeneration: v.generation, Conditions: append([]metav1.Condition(nil), had.Conditions...)}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: v.generation, Reason: v.reason, Message: v.message}
	switch v.reason {
	case v1alpha1.ReasonApplied:
		if built == cur || sameWaves(built, cur) {
			cond.Status = metav1.ConditionTrue
			want.Waves = waveNames(cur)
			cond.Message = "in force: waves " + strings.Join(want.Waves, ", ")
		} else {
			cond.Reason, cond.Message = v1alpha1.ReasonNotApplied, cmp.Or(refusal, "not in force yet")
		}
	case v1alpha1.ReasonInvalid:
		if v.fallback && sameWaves(built, cur) {
			cond.Message += "; the generation accepted before stays in force"
			want.Waves = waveNames(cur)
		}
	}
	meta.SetStatusCondition(&want.Conditions, cond)
	return want
}

// sameWaves tells whether a and b have the same waves, wave policy and
// freeze windows.
func sameWaves(a, b *config.Config) bool {
	return a != nil && b != nil && reflect.DeepEqual(a.Fleet.Waves, b.Fleet.Waves) &&
		reflect.DeepEqual(a.Fleet.WavePolicy, b.Fleet.WavePolicy) && reflect.DeepEqual(a.Fleet.FreezeWindows, b.Fleet.FreezeWindows)
}

func waveNames(cfg *config.Config) []string {
	out := make([]string, len(cfg.Fleet.Waves))
	for i, w := range cfg.Fleet.Waves {
		out[i] = w.Name
	}
	return out
}

// desiredCluster is the status of a Cluster resource whose generation's
// verdict is v and whose cluster's source is src.
func desiredCluster(had v1alpha1.ClusterStatus, v verdict, src string, cur, built *config.Config, refusal string) v1alpha1.ClusterStatus {
	want := v1alpha1.ClusterStatus{ObservedGeneration: v.generation, Conditions: append([]metav1.Condition(nil), had.Conditions...)}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: v.generation, Reason: v.reason, Message: v.message}
	c, inCur := cur.Cluster(v.name)
	inCur = inCur && c.Source == src // the cluster of that name in force is this resource's
	switch v.reason {
	case v1alpha1.ReasonApplied:
		if inCur && (built == cur || sameCluster(built, cur, v.name)) {
			cond.Status = metav1.ConditionTrue
			if want.Wave = waveOf(cur, v.name); want.Wave != "" {
				cond.Message = fmt.Sprintf("in force: cluster %q, in wave %s", v.name, want.Wave)
			} else {
				cond.Message = fmt.Sprintf("in force: cluster %q, in no wave (no wave lists it or selects its labels)", v.name)
			}
		} else {
			cond.Reason, cond.Message = v1alpha1.ReasonNotApplied, cmp.Or(refusal, "not in force yet")
		}
	case v1alpha1.ReasonNotPlatformNamespace:
	default:
		if v.fallback && inCur {
			cond.Message += "; the generation accepted before stays in force"
			want.Wave = waveOf(cur, v.name)
		}
	}
	meta.SetStatusCondition(&want.Conditions, cond)
	return want
}

// waveOf is the name of the wave that has the cluster name in cfg, "" when
// none.
func waveOf(cfg *config.Config, name string) string {
	for _, w := range cfg.Fleet.Waves {
		if slices.Contains(w.ClusterNames(), name) {
			return w.Name
		}
	}
	return ""
}

// sameCluster tells whether the cluster name is the same in a and b.
func sameCluster(a, b *config.Config, name string) bool {
	if a == nil || b == nil {
		return false
	}
	x, ok1 := a.Cluster(name)
	y, ok2 := b.Cluster(name)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}

// desired is the status of a resource whose generation's verdict is v,
// from its status had (the Ready condition keeps its transition time
// while it holds), the configuration in force cur and the last one built.
func desired(ctx context.Context, o StatusOptions, had v1alpha1.ApplicationStatus, v verdict,
	cur, built *config.Config, refusal string) (v1alpha1.ApplicationStatus, error) {
	want := v1alpha1.ApplicationStatus{ObservedGeneration: v.generation, Conditions: append([]metav1.Condition(nil), had.Conditions...)}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: v.generation, Reason: v.reason, Message: v.message}
	_, inCur := cur.Application(v.name)
	owns := false // the application of that name in force is this resource's
	switch v.reason {
	case v1alpha1.ReasonApplied:
		if inCur && (built == cur || sameApplication(built, cur, v.name)) {
			cond.Status, cond.Message, owns = metav1.ConditionTrue, "in force: flotilla tracks the application "+strconv.Quote(v.name), true
		} else {
			cond.Reason, cond.Message = v1alpha1.ReasonNotApplied, cmp.Or(refusal, "not in force yet")
		}
	default:
		if v.fallback {
			cond.Message += "; the generation accepted before stays in force"
			owns = inCur
		}
	}
	meta.SetStatusCondition(&want.Conditions, cond)
	if !owns {
		return want, nil
	}
	st, err := o.Apps.App(ctx, v.name)
	if err != nil {
		return want, err
	}
	if p := st.LastSeen; p != nil {
		want.LastSeen = &v1alpha1.Version{Tag: p.Tag, Digest: p.Digest, Source: p.Source, Reason: p.Error, At: at(p.At)}
	}
	if p := st.LastSkipped; p != nil {
		want.LastSkipped = &v1alpha1.Version{Tag: p.Tag, Digest: p.Digest, Source: p.Source, Outcome: p.Outcome, Reason: p.Reason, At: at(p.At)}
	}
	if st.DeployedTag != "" || st.DeployedDigest != "" {
		want.Deployed = &v1alpha1.Version{Tag: st.DeployedTag, Digest: st.DeployedDigest, Rollout: st.DeployedRollout, At: at(st.DeployedAt)}
	}
	if id := st.LatestRollout; id != "" {
		want.Rollout = &v1alpha1.Rollout{ID: id, Tag: st.LatestTag}
		ro, err := o.Rollouts.Get(ctx, id)
		switch {
		case err == nil:
			want.Rollout.Phase, want.Rollout.Wave, want.Rollout.Clusters = string(ro.Phase), ro.WaveSummary(), ro.ClustersSummary()
			want.Rollout.Waiting, want.Rollout.Reason = ro.Waiting, ro.Reason
		case !errors.Is(err, rollout.ErrNotFound):
			return want, fmt.Errorf("reading rollout %s: %w", id, err)
		}
	}
	return want, nil
}

// sameApplication tells whether the application name is the same in a
// and b (the defaulted, validated one of each).
func sameApplication(a, b *config.Config, name string) bool {
	if a == nil || b == nil {
		return false
	}
	x, ok1 := a.Application(name)
	y, ok2 := b.Application(name)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}

func at(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t)
	return &m
}

// apply writes the resource's status (server-side apply of the status
// subresource, as flotilla's field manager).
func (s *Source) apply(ctx context.Context, k key, st any) error {
	status := map[string]any{}
	if err := fromMap(st, &status); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": k.kind,
		"metadata": map[string]any{"name": k.name, "namespace": k.namespace},
		"status":   status,
	}}
	gvr := map[string]schema.GroupVersionResource{kindApplication: v1alpha1.Applications, kindCluster: v1alpha1.Clusters,
		kindWavePolicy: v1alpha1.WavePolicies}[k.kind]
	_, err := s.o.Client.Resource(gvr).Namespace(k.namespace).
		ApplyStatus(ctx, k.name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

// fromMap decodes v (a map, a struct) into out through JSON.
func fromMap(v, out any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func equalJSON(a, b any) (bool, error) {
	x, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	y, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}
