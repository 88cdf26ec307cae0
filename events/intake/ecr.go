package intake

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderECR is the sender type of Amazon ECR events delivered by an
// EventBridge API destination.
const SenderECR = "ecr"

// EventBridge fields of an ECR image action.
const (
	ecrSource           = "aws.ecr"
	ecrImageAction      = "ECR Image Action"
	ecrActionPush       = "PUSH"
	ecrResultSuccess    = "SUCCESS"
	ecrHostSuffix       = ".amazonaws.com"
	ecrChinaHostSuffix  = ".amazonaws.com.cn"
	ecrChinaRegionStart = "cn-"
)

// ECRSender reads Amazon ECR events that an EventBridge rule sends to an API
// destination, unchanged (no input transformer). Each request carries one
// event; a successful push of a tagged image ("ECR Image Action", action-type
// PUSH) becomes a [TypeImagePushed]. Failed pushes, deletes, untagged pushes
// and other ECR events (scans, replication, pull through cache, ...) are
// ignored.
//
// Authentication: the API destination's EventBridge connection sends an API
// key header of the user's choice, Basic credentials, or an OAuth bearer
// token; ReceiverConfig.Header names the header (default "Authorization"),
// and see [checkHeaderToken] for the forms accepted.
type ECRSender struct {
	// Secret is the receiver's secret.
	Secret string
	// Header carries the secret. Default "Authorization".
	Header string
}

func newECRSender(rc ReceiverConfig) (Sender, error) {
	return ECRSender{Secret: rc.Secret, Header: rc.Header}, nil
}

type ecrEvent struct {
	ID         string `json:"id"`
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Account    string `json:"account"`
	Time       string `json:"time"`
	Region     string `json:"region"`
	Detail     struct {
		Result            string `json:"result"`
		RepositoryName    string `json:"repository-name"`
		ImageDigest       string `json:"image-digest"`
		ActionType        string `json:"action-type"`
		ImageTag          string `json:"image-tag"`
		ManifestMediaType string `json:"manifest-media-type"`
	} `json:"detail"`
}

// Authenticate implements [Sender].
func (s ECRSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, cmp.Or(s.Header, "Authorization"), s.Secret)
}

// Parse implements [Sender].
func (ECRSender) Parse(d *Delivery) (Result, error) {
	if err := checkJSONHookMediaType(d); err != nil {
		return Result{}, err
	}
	var ev ecrEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return Result{}, malformed("decoding EventBridge event: %w", err)
	}
	if ev.DetailType == "" || ev.Source == "" {
		return Result{}, malformed("not an EventBridge event: no detail-type or source (is an input transformer set?)")
	}
	res := Result{DeliveryID: ev.ID}
	if reason := ev.skipReason(); reason != "" {
		res.Ignored = reason
		return res, nil
	}
	registry, err := ev.registry()
	if err != nil {
		return Result{}, err
	}
	if ev.Detail.RepositoryName == "" {
		return Result{}, malformed("ECR push has no detail.repository-name")
	}
	p := events.ImagePushed{
		Registry:   registry,
		Repository: ev.Detail.RepositoryName,
		Tag:        ev.Detail.ImageTag,
		Digest:     ev.Detail.ImageDigest,
		MediaType:  ev.Detail.ManifestMediaType,
		Sender:     SenderECR,
		DeliveryID: ev.ID,
	}
	// The time is informative only: a malformed one is not worth refusing
	// a push for.
	at, _ := time.Parse(time.RFC3339Nano, ev.Time)
	e, err := imagePushedEvent(d, cmp.Or(ev.ID, bodyKey(d)), p, at)
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// skipReason says why ev carries no pushed tag, or "" when it does.
func (ev *ecrEvent) skipReason() string {
	switch {
	case ev.Source != ecrSource:
		return "source " + ev.Source
	case ev.DetailType != ecrImageAction:
		return ev.DetailType
	case !strings.EqualFold(ev.Detail.ActionType, ecrActionPush):
		if ev.Detail.ActionType == "" {
			return "no action-type"
		}
		return strings.ToLower(ev.Detail.ActionType)
	case !strings.EqualFold(ev.Detail.Result, ecrResultSuccess):
		return "failed push"
	case ev.Detail.ImageTag == "":
		return "untagged push"
	}
	return ""
}

// registry is the host of the account's private registry in the region:
// <account>.dkr.ecr.<region>.amazonaws.com, or .amazonaws.com.cn in China.
func (ev *ecrEvent) registry() (string, error) {
	if !ecrValidName(ev.Account, "0123456789") {
		return "", malformed("ECR event has no valid account: %q", ev.Account)
	}
	if !ecrValidName(ev.Region, "abcdefghijklmnopqrstuvwxyz0123456789-") {
		return "", malformed("ECR event has no valid region: %q", ev.Region)
	}
	suffix := ecrHostSuffix
	if strings.HasPrefix(ev.Region, ecrChinaRegionStart) {
		suffix = ecrChinaHostSuffix
	}
	return fmt.Sprintf("%s.dkr.ecr.%s%s", ev.Account, ev.Region, suffix), nil
}

// ecrValidName tells whether s is a non-empty string of chars only, so it can
// go into a host name.
func ecrValidName(s, chars string) bool {
	return s != "" && strings.Trim(s, chars) == ""
}
