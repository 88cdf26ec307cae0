package intake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/gates"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// FlaggerSender reads Flagger's event webhook: every Kubernetes event Flagger
// records for a canary becomes a [TypeCanary].
//
// Authentication: Flagger cannot sign, so the receiver's secret is a token,
// either as the last path segment (/hooks/<receiver>/<token>) or as the
// "token" key of the hook's metadata. flotilla's per-canary event hook also
// sets the metadata keys "cluster" and "rollout".
//
// Gate webhooks (confirm-rollout, pre-rollout, ...) share the payload shape
// but carry no eventMessage, and Flagger does not say which gate it calls:
// their URL must say it with ?gate=<type> (or metadata.gate), since a 2xx
// opens a confirmation gate but triggers a rollback hook. A gate call becomes
// a [GateCall] that the intake's [GateKeeper] answers; a post-rollout call,
// which reports the outcome, becomes a [TypeCanary] too.
type FlaggerSender struct {
	// Secret is the receiver's secret.
	Secret string
}

// Metadata keys of a Flagger event webhook.
const (
	flaggerMetaMessage   = "eventMessage"
	flaggerMetaType      = "eventType"
	flaggerMetaTimestamp = "timestamp"
	flaggerMetaToken     = "token"
	flaggerMetaCluster   = "cluster"
	flaggerMetaRollout   = "rollout"
	flaggerMetaGate      = "gate"
)

// Flagger's gate webhook types ([GateCall.Gate]; the domain's, pkg/gates).
const (
	GateConfirmRollout         = gates.ConfirmRollout
	GatePreRollout             = gates.PreRollout
	GateRollout                = gates.Rollout
	GateConfirmTrafficIncrease = gates.ConfirmTrafficIncrease
	GateConfirmPromotion       = gates.ConfirmPromotion
	GatePostRollout            = gates.PostRollout
	GateRollback               = gates.RollbackGate
)

var gateTypes = gates.Types

// GateCall is Flagger calling one of a canary's gate webhooks
// (pkg/gates.Call, the domain's type).
type GateCall = gates.Call

// GateDecision answers a [GateCall] (pkg/gates.Decision).
type GateDecision = gates.Decision

// GateKeeper decides gate calls. It must answer quickly (Flagger's hook
// timeout is 10s by default) and must not block on the call's outcome.
type GateKeeper interface {
	Decide(ctx context.Context, call GateCall) (GateDecision, error)
}

// DefaultGateKeeper is the intake's gate keeper when none is configured:
// every gate is open and no rollback is asked for (gates.Default).
type DefaultGateKeeper struct{}

// Decide implements [GateKeeper].
func (DefaultGateKeeper) Decide(_ context.Context, call GateCall) (GateDecision, error) {
	return gates.Default(call), nil
}

// parseFlaggerGate reads a gate call: post-rollout reports the outcome and
// becomes a canary event; the others become a [GateCall].
func parseFlaggerGate(d *Delivery, p flaggerv1.CanaryWebhookPayload) (Result, error) {
	gate := cmp.Or(d.Query.Get("gate"), p.Metadata[flaggerMetaGate])
	if gate == "" {
		return Result{}, malformed("Flagger gate call without a gate type: add ?gate=<type> to the webhook URL (or metadata.gate), " +
			"so that flotilla can tell a rollback hook from a confirmation gate")
	}
	if !slices.Contains(gateTypes, gate) {
		return Result{}, malformed("unknown gate type %q; want one of %s", gate, strings.Join(gateTypes, ", "))
	}
	if p.Name == "" || p.Namespace == "" {
		return Result{}, malformed("Flagger payload has no canary name or namespace")
	}
	call := GateCall{
		Gate:      gate,
		Cluster:   cmp.Or(p.Metadata[flaggerMetaCluster], d.Query.Get("cluster")),
		Namespace: p.Namespace,
		Name:      p.Name,
		Phase:     string(p.Phase),
		Checksum:  p.Checksum,
		RolloutID: p.Metadata[flaggerMetaRollout],
		Metadata:  withoutToken(p.Metadata),
	}
	if gate != GatePostRollout {
		return Result{Gate: &call, DeliveryID: gate + " " + call.Namespace + "/" + call.Name}, nil
	}
	// Flagger sends post-rollout with the final phase.
	msg := postRolloutMessage + string(p.Phase)
	return flaggerEvent(d, p, msg)
}

// postRolloutMessage starts the message of a canary event made from a
// post-rollout call.
const postRolloutMessage = "post-rollout hook: "

func withoutToken(m map[string]string) map[string]string {
	if _, ok := m[flaggerMetaToken]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, flaggerMetaToken)
	return out
}

func (FlaggerSender) usesPathToken() bool { return true }

// Authenticate implements [Sender]. A path token, when present, is the only
// token considered.
func (s FlaggerSender) Authenticate(_ context.Context, d *Delivery) error {
	secret := s.Secret
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	token := d.PathToken
	if token == "" {
		var p flaggerv1.CanaryWebhookPayload
		if err := json.Unmarshal(d.Body, &p); err != nil {
			return unauthenticated("no token in the path, and no readable payload metadata")
		}
		token = p.Metadata[flaggerMetaToken]
	}
	if token == "" {
		return unauthenticated("no token in the path or in metadata.token")
	}
	if !secureEqual(token, secret) {
		return unauthenticated("wrong token")
	}
	return nil
}

// Parse implements [Sender].
func (FlaggerSender) Parse(d *Delivery) (Result, error) {
	var p flaggerv1.CanaryWebhookPayload
	if err := json.Unmarshal(d.Body, &p); err != nil {
		return Result{}, malformed("decoding Flagger payload: %w", err)
	}
	msg := p.Metadata[flaggerMetaMessage]
	if msg == "" {
		return parseFlaggerGate(d, p)
	}
	return flaggerEvent(d, p, msg)
}

// flaggerEvent builds the [TypeCanary] of one Flagger event (or post-rollout
// call) with message msg.
func flaggerEvent(d *Delivery, p flaggerv1.CanaryWebhookPayload, msg string) (Result, error) {
	if p.Name == "" || p.Namespace == "" {
		return Result{}, malformed("Flagger payload has no canary name or namespace")
	}
	cluster := p.Metadata[flaggerMetaCluster]
	if cluster == "" {
		cluster = d.Query.Get("cluster")
	}
	if cluster == "" {
		return Result{}, malformed("Flagger event has no cluster: set metadata.cluster on the hook or ?cluster= on its URL")
	}

	c := events.Canary{
		Cluster:   cluster,
		Namespace: p.Namespace,
		Name:      p.Name,
		Phase:     string(p.Phase),
		Outcome:   ClassifyCanary(string(p.Phase), msg),
		Message:   msg,
		EventType: p.Metadata[flaggerMetaType],
		Checksum:  p.Checksum,
		RolloutID: p.Metadata[flaggerMetaRollout],
		Receiver:  d.Receiver,
	}
	// The body does not name the cluster when it comes from the query.
	h := sha256.New()
	h.Write([]byte(cluster))
	h.Write([]byte{0})
	h.Write(d.Body)
	id := hex.EncodeToString(h.Sum(nil))

	e, err := events.New(d.Receiver+"/"+SenderFlagger+"/"+id, hookSource(d.Receiver), events.TypeCanary, c)
	if err != nil {
		return Result{}, err
	}
	e.SetSubject(cluster + "/" + c.Namespace + "/" + c.Name)
	e.SetTime(eventTime(flaggerTimestamp(p.Metadata[flaggerMetaTimestamp]), d))
	if c.RolloutID != "" {
		e.SetExtension(events.ExtRolloutID, c.RolloutID)
	}
	return Result{Events: []cloudevents.Event{e}, DeliveryID: id}, nil
}

// ClassifyCanary tells what a Flagger event means for the canary. The phase
// Flagger sends with an event is often the one before it (a canary that
// failed keeps reporting Failed while its next revision is detected,
// checked and confirmed), so the message decides: only a failure message,
// or the post-rollout hook (called with the final phase), is a failure.
func ClassifyCanary(phase, message string) events.CanaryOutcome {
	switch {
	case strings.HasPrefix(message, "Promotion completed!"),
		strings.HasPrefix(message, postRolloutMessage) && phase == string(flaggerv1.CanaryPhaseSucceeded):
		return events.CanarySucceeded
	case strings.HasPrefix(message, "Initialization done!"):
		return events.CanaryInitialized
	case strings.HasPrefix(message, postRolloutMessage) && phase == string(flaggerv1.CanaryPhaseFailed),
		strings.HasPrefix(message, "Canary failed!"),
		strings.HasPrefix(message, "Rolling back"):
		return events.CanaryFailed
	default:
		return events.CanaryProgressing
	}
}

// flaggerTimestamp reads unix milliseconds as a string; zero when unreadable.
func flaggerTimestamp(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
