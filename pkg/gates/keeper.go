package gates

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Policies finds the validation policy of the canary namespace/name in a
// cluster; false when no application owns it.
type Policies func(cluster, namespace, name string) (Policy, bool)

// Approvals are the recorded verdicts of manual validations.
type Approvals interface {
	// Approval returns the verdict for the rollout in the cluster: one given
	// for that cluster wins over one given for the whole rollout.
	Approval(ctx context.Context, rolloutID, cluster string) (Approval, bool, error)
	// FirstSeen returns when key was first seen, recording now if never.
	FirstSeen(ctx context.Context, key string, now time.Time) (time.Time, error)
}

// Labels reads the labels label watch looks at (pkg/cluster.Set, in
// production).
type Labels interface {
	// WorkloadLabels returns the labels of the workload (kind Deployment or
	// DaemonSet), and those of the pods its selector matches.
	WorkloadLabels(ctx context.Context, cluster, namespace, kind, name string) (workload map[string]string, pods []map[string]string, err error)
}

// Keeper decides gate calls by the applications' validation policies. A
// call for a canary without a policy gets [Default]'s answer.
type Keeper struct {
	policies  Policies
	approvals Approvals
	labels    Labels
	now       func() time.Time
}

// NewKeeper returns a Keeper. now defaults to time.Now.
func NewKeeper(p Policies, a Approvals, l Labels, now func() time.Time) *Keeper {
	if now == nil {
		now = time.Now
	}
	return &Keeper{policies: p, approvals: a, labels: l, now: now}
}

// Decide decides one gate call (the intake's GateKeeper, in pkg/app).
func (k *Keeper) Decide(ctx context.Context, c Call) (Decision, error) {
	p, ok := k.policies(c.Cluster, c.Namespace, c.Name)
	if !ok || !p.Enabled() {
		return Default(c), nil
	}
	switch c.Gate {
	case ConfirmPromotion:
		return k.promote(ctx, p, c)
	case RollbackGate:
		return k.rollback(ctx, p, c)
	default:
		return Default(c), nil
	}
}

// promote decides confirm-promotion: open when every validation allows it.
func (k *Keeper) promote(ctx context.Context, p Policy, c Call) (Decision, error) {
	left, err := k.periodLeft(ctx, p, c)
	if err != nil {
		return Decision{}, err
	}
	if p.LabelWatch != nil {
		if found, err := k.invalidated(ctx, p, c); err != nil || found != "" {
			return closed("invalidated: " + found), err
		}
	}
	if p.Manual != nil {
		v, err := k.verdict(ctx, p.Manual, c, left)
		if err != nil {
			return Decision{}, err
		}
		switch v.Status {
		case StatusValid:
			return open("approved" + v.by()), nil
		case StatusInvalid:
			return closed("rejected" + v.by() + ": the rollback gate rolls it back"), nil
		}
		return closed(fmt.Sprintf("waiting for approval: flotilla approve %s --cluster %s", c.RolloutID, c.Cluster)), nil
	}
	if left > 0 {
		return closed(fmt.Sprintf("validation period: %s left", left.Round(time.Second))), nil
	}
	return open("validation period over, no invalidation label"), nil
}

// rollback decides the rollback hook: open (roll back) when a validation
// failed.
func (k *Keeper) rollback(ctx context.Context, p Policy, c Call) (Decision, error) {
	if p.LabelWatch != nil {
		found, err := k.invalidated(ctx, p, c)
		if err != nil {
			return Decision{}, err
		}
		if found != "" {
			return open("invalidated: " + found), nil
		}
	}
	if p.Manual != nil {
		left, err := k.periodLeft(ctx, p, c)
		if err != nil {
			return Decision{}, err
		}
		v, err := k.verdict(ctx, p.Manual, c, left)
		if err != nil {
			return Decision{}, err
		}
		if v.Status == StatusInvalid {
			return open("rejected" + v.by()), nil
		}
	}
	return closed("no validation failed"), nil
}

// periodLeft is how much of the validation period the canary revision has
// still to run, counted from the first gate call seen for it.
func (k *Keeper) periodLeft(ctx context.Context, p Policy, c Call) (time.Duration, error) {
	if p.Period <= 0 {
		return 0, nil
	}
	now := k.now()
	first, err := k.approvals.FirstSeen(ctx, revisionKey(c), now)
	if err != nil {
		return 0, err
	}
	return max(0, p.Period-now.Sub(first)), nil
}

// verdict is the manual verdict: the recorded approval, else the
// after-deadline status once the period is over.
func (k *Keeper) verdict(ctx context.Context, m *Manual, c Call, left time.Duration) (Approval, error) {
	if c.RolloutID != "" {
		a, ok, err := k.approvals.Approval(ctx, c.RolloutID, c.Cluster)
		if err != nil || ok {
			return a, err
		}
	}
	if left <= 0 && m.StatusAfterDeadline != "" && m.StatusAfterDeadline != StatusNone {
		return Approval{Status: m.StatusAfterDeadline, By: "validation deadline"}, nil
	}
	return Approval{Status: StatusNone}, nil
}

// invalidated returns the first invalidation label found on the canary's
// Deployment or pods, as "deployment label k=v" / "pod label k=v", or "".
func (k *Keeper) invalidated(ctx context.Context, p Policy, c Call) (string, error) {
	w := p.LabelWatch
	dep, pods, err := k.labels.WorkloadLabels(ctx, c.Cluster, c.Namespace, p.Kind, c.Name)
	if err != nil {
		return "", fmt.Errorf("reading labels of %s/%s in %s: %w", c.Namespace, c.Name, c.Cluster, err)
	}
	if kv := match(dep, w.DeploymentInvalidationLabels); kv != "" {
		return strings.ToLower(cmp.Or(p.Kind, "Deployment")) + " label " + kv, nil
	}
	for _, pod := range pods {
		if kv := match(pod, w.PodInvalidationLabels); kv != "" {
			return "pod label " + kv, nil
		}
	}
	return "", nil
}

// match returns the first of want (by key order) that labels carry, as k=v.
func match(labels, want map[string]string) string {
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if v, ok := labels[key]; ok && v == want[key] {
			return key + "=" + v
		}
	}
	return ""
}

// revisionKey identifies one canary revision in one cluster: Flagger's
// checksum changes with every new revision.
func revisionKey(c Call) string {
	return strings.Join([]string{c.Cluster, c.Namespace, c.Name, c.Checksum}, "/")
}

func open(reason string) Decision { return Decision{Open: true, Reason: reason} }
func closed(reason string) Decision {
	return Decision{Open: false, Reason: reason}
}
