package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

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
// but carry no eventMessage; they are answered 202 and ignored. Do not point
// a rollback hook here: Flagger rolls back on any 2xx.
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
)

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
		return Result{Ignored: "gate call"}, nil
	}
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

	c := Canary{
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

	e, err := New(d.Receiver+"/"+SenderFlagger+"/"+id, hookSource(d.Receiver), TypeCanary, c)
	if err != nil {
		return Result{}, err
	}
	e.SetSubject(cluster + "/" + c.Namespace + "/" + c.Name)
	e.SetTime(eventTime(flaggerTimestamp(p.Metadata[flaggerMetaTimestamp]), d))
	if c.RolloutID != "" {
		e.SetExtension(ExtRolloutID, c.RolloutID)
	}
	return Result{Events: []cloudevents.Event{e}, DeliveryID: id}, nil
}

// ClassifyCanary tells what a Flagger event means for the canary. The phase
// Flagger sends is often the one before the event, so the message decides
// first.
func ClassifyCanary(phase, message string) CanaryOutcome {
	switch {
	case strings.HasPrefix(message, "Promotion completed!"):
		return CanarySucceeded
	case strings.HasPrefix(message, "Initialization done!"):
		return CanaryInitialized
	case phase == string(flaggerv1.CanaryPhaseFailed),
		strings.HasPrefix(message, "Canary failed!"),
		strings.HasPrefix(message, "Rolling back"):
		return CanaryFailed
	default:
		return CanaryProgressing
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
