package gates

// Flagger's gate webhook types ([Call.Gate]).
const (
	ConfirmRollout         = "confirm-rollout"
	PreRollout             = "pre-rollout"
	Rollout                = "rollout"
	ConfirmTrafficIncrease = "confirm-traffic-increase"
	ConfirmPromotion       = "confirm-promotion"
	PostRollout            = "post-rollout"
	RollbackGate           = "rollback"
)

// Types lists the gate types, in the order Flagger calls them.
var Types = []string{ConfirmRollout, PreRollout, Rollout, ConfirmTrafficIncrease, ConfirmPromotion, PostRollout, RollbackGate}

// Call is Flagger calling one of a canary's gate webhooks (the intake
// reads it from the webhook). Flagger waits for the answer: a 2xx opens a
// gate, anything else holds or fails it, except for rollback hooks, where a
// 2xx rolls the canary back.
type Call struct {
	Gate      string            `json:"gate"`
	Cluster   string            `json:"cluster,omitempty"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Phase     string            `json:"phase,omitempty"`
	Checksum  string            `json:"checksum,omitempty"`
	RolloutID string            `json:"rolloutId,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// Decision answers a [Call]. Open means "2xx": proceed for every gate,
// roll back for a rollback hook.
type Decision struct {
	Open   bool
	Reason string
}

// Default is the decision when no policy applies: every gate is open and
// no rollback is asked for.
func Default(c Call) Decision {
	if c.Gate == RollbackGate {
		return Decision{Open: false, Reason: "no rollback requested"}
	}
	return Decision{Open: true, Reason: "no gate configured"}
}
