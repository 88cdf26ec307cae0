package fleetrollout

import (
	"context"
	_ "embed"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// CRD is the FleetRollout CustomResourceDefinition (the chart installs it
// from its crds/).
//
//go:embed fleetrollouts.yaml
var CRD []byte

// Resource is the FleetRollouts' group, version and resource.
var Resource = schema.GroupVersionResource{Group: "flotilla.dev", Version: "v1alpha1", Resource: "fleetrollouts"}

// fieldManager owns every field flotilla writes (server-side apply).
const fieldManager = "flotilla"

// Journal is what the projector follows (pkg/bus).
type Journal interface {
	bus.Reader
	LastSeq() uint64
}

// Rollouts is the rollout state (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	List(ctx context.Context, before string, limit int) (rollout.Page, error)
}

// Projector keeps a FleetRollout per rollout current in a namespace of
// the management cluster: at its start for every rollout in flight and
// the latest finished ones, then for each rollout whose events the bus
// carries.
type Projector struct {
	j    Journal
	ros  Rollouts
	res  dynamic.ResourceInterface
	log  *slog.Logger
	seen map[string]int64 // rollout id -> version last applied
}

// New returns a projector writing FleetRollouts into namespace through
// client.
func New(j Journal, ros Rollouts, client dynamic.Interface, namespace string, log *slog.Logger) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Projector{j: j, ros: ros, res: client.Resource(Resource).Namespace(namespace), log: log, seen: map[string]int64{}}
}

// catchUp is how many finished rollouts the start projects.
const catchUp = 100

// Run projects until ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	from := p.j.LastSeq()
	if page, err := p.ros.List(ctx, "", catchUp); err != nil {
		p.log.Warn("fleetrollouts: listing rollouts", "error", err)
	} else {
		for _, ro := range page.Rollouts {
			p.project(ctx, ro)
		}
	}
	f := bus.Follower{Stalled: func(err error, retryIn time.Duration) {
		p.log.Warn("fleetrollouts: reading the bus; retrying", "error", err, "retry_in", retryIn)
	}}
	return f.Run(ctx, p.j, from, func(ctx context.Context, recs []bus.Record) (uint64, error) {
		var ids []string
		for _, rec := range recs {
			if rec.Err != nil {
				continue
			}
			if id := events.RolloutID(rec.Event); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			ro, err := p.ros.Get(ctx, id)
			if err != nil {
				p.log.Warn("fleetrollouts: reading a rollout", "rollout_id", id, "error", err)
				continue
			}
			p.project(ctx, ro)
		}
		return recs[len(recs)-1].Seq, nil
	})
}

// project applies ro's FleetRollout, spec then status, unless this
// version was applied already. A failure is logged: the rollout's next
// event tries again.
func (p *Projector) project(ctx context.Context, ro rollout.Rollout) {
	if v, ok := p.seen[ro.ID]; ok && v >= ro.Version {
		return
	}
	obj, status := Object(ro)
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if _, err := p.res.Apply(ctx, obj.GetName(), obj, opts); err != nil {
		p.log.Warn("fleetrollouts: applying", "rollout_id", ro.ID, "error", err)
		return
	}
	if _, err := p.res.ApplyStatus(ctx, obj.GetName(), status, opts); err != nil {
		p.log.Warn("fleetrollouts: applying the status", "rollout_id", ro.ID, "error", err)
		return
	}
	p.seen[ro.ID] = ro.Version
	if ro.Phase.Done() {
		delete(p.seen, ro.ID) // it changes no more; keep the map to those in flight
	}
}

// Object is ro's FleetRollout (metadata and spec) and its status, as
// applied.
func Object(ro rollout.Rollout) (obj, status *unstructured.Unstructured) {
	head := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAPIVersion(Resource.GroupVersion().String())
		u.SetKind("FleetRollout")
		u.SetName(Name(ro.ID))
		return u
	}
	obj = head()
	obj.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/application": labelValue(ro.Application)})
	spec := map[string]any{"rolloutID": ro.ID, "application": ro.Application, "version": ro.Tag, "image": ro.Image, "digest": ro.Digest}
	if ro.RollbackOf != "" {
		spec["rollbackOf"] = ro.RollbackOf
	}
	obj.Object["spec"] = spec
	status = head()
	st := map[string]any{
		"phase": string(ro.Phase), "clusters": ro.ClustersSummary(), "observedVersion": ro.Version,
		"updated": ro.Updated.UTC().Format(time.RFC3339),
	}
	if w := ro.WaveSummary(); w != "" {
		st["wave"] = w
	}
	if ro.Waiting != "" {
		st["waiting"] = ro.Waiting
	}
	if ro.Reason != "" {
		st["reason"] = ro.Reason
	}
	status.Object["status"] = st
	return obj, status
}

var notName = regexp.MustCompile(`[^a-z0-9.-]+`)

// Name is a rollout's FleetRollout name: its id, made a DNS subdomain.
func Name(id string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(id), "-"), "-.")
	if len(n) > 253 {
		n = strings.TrimRight(n[:253], "-.")
	}
	return n
}

// labelValue is s as a label value (63 characters of the allowed ones).
func labelValue(s string) string {
	v := strings.Trim(notName.ReplaceAllString(strings.ToLower(s), "-"), "-.")
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-.")
	}
	return v
}
