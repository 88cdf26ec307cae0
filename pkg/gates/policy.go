package gates

import "time"

// Policy is the validation of one application's canaries.
type Policy struct {
	// Kind is the workload's kind, Deployment (the default) or DaemonSet:
	// label watch reads its labels and its pods'.
	Kind string
	// Period is the validation period: how long a canary revision must run
	// (from the first gate call seen for it) before it may be promoted by
	// label watch, or decided by Manual.StatusAfterDeadline.
	Period time.Duration
	// Manual, when set, holds promotion until an approval.
	Manual *Manual
	// LabelWatch, when set, rolls back on invalidation labels.
	LabelWatch *LabelWatch
}

// Manual is Kanary's manual validation.
type Manual struct {
	// StatusAfterDeadline decides once the period is over without an
	// approval: StatusValid promotes, StatusInvalid rolls back, StatusNone
	// (the default) keeps waiting.
	StatusAfterDeadline Status
}

// Status is a manual validation verdict.
type Status string

// Statuses.
const (
	StatusNone    Status = "none"
	StatusValid   Status = "valid"
	StatusInvalid Status = "invalid"
)

// LabelWatch is Kanary's label-watch validation: any of these labels, with
// these values, invalidates the canary.
type LabelWatch struct {
	DeploymentInvalidationLabels map[string]string
	PodInvalidationLabels        map[string]string
}

// Enabled reports whether p validates anything.
func (p Policy) Enabled() bool { return p.Manual != nil || p.LabelWatch != nil }
