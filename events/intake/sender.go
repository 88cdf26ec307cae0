package intake

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Sender turns one authenticated delivery into events. There is one
// implementation per sender type, each in its own file; [NewSender] builds one
// from a receiver's config.
type Sender interface {
	// Authenticate checks that d comes from whoever holds the receiver's
	// credentials. Comparisons are constant-time; a failure wraps
	// [ErrUnauthenticated] and is permanent. The intake does not call it on
	// an Insecure receiver.
	Authenticate(ctx context.Context, d *Delivery) error
	// Parse turns an authenticated delivery into events. A delivery that
	// cannot be parsed yields a permanent error that says why; a valid one
	// that carries nothing to act on yields a Result with Ignored set.
	Parse(d *Delivery) (Result, error)
}

// Delivery is one webhook request as the intake received it.
type Delivery struct {
	// Receiver is the name of the receiver the delivery was posted to.
	Receiver string
	Header   http.Header
	// Body is the raw request body: signatures are computed over it.
	Body  []byte
	Query url.Values
	// PathToken is the optional last path segment of /hooks/<receiver>/<token>.
	PathToken string
	// ReceivedAt is when the intake received the delivery. It is the event
	// time when the sender does not say when the occurrence happened.
	ReceivedAt time.Time
}

// Result is what a delivery yields.
type Result struct {
	Events []cloudevents.Event
	// Ignored says why a valid delivery yields no events (a ping, a pull, a
	// blob push, a deleted branch, ...). Empty when Events is not.
	Ignored string
	// DeliveryID is the sender's id of the delivery, for logs, if it has one.
	DeliveryID string
	// Gate is set when the delivery is a Flagger gate call: the sender waits
	// for the intake's [GateKeeper] to decide it.
	Gate *GateCall
}

// ErrUnauthenticated is wrapped by every authentication failure.
var ErrUnauthenticated = fault.New(fault.ErrUnauthenticated, "unauthenticated")

// ErrUnsupportedMediaType is wrapped by the error of a delivery whose
// Content-Type the sender does not speak.
var ErrUnsupportedMediaType = fault.New(fault.ErrUnsupportedMediaType, "unsupported media type")

// Sender types accepted by [NewSender].
const (
	SenderDistribution = "distribution"
	SenderGitHub       = "github"
	SenderFlagger      = "flagger"
)

// senderFactory builds a sender from its receiver's config. It returns an
// error when the config cannot work (a header name that is not one, OIDC
// settings that do not parse); the intake has already checked that a
// receiver that is not Insecure has its credentials.
type senderFactory func(rc ReceiverConfig) (Sender, error)

var senders = map[string]senderFactory{
	SenderDockerHub:       newDockerHubSender,
	SenderHarbor:          newHarborSender,
	SenderDistribution:    newDistributionSender,
	SenderGitHub:          func(rc ReceiverConfig) (Sender, error) { return GitHubSender{Secret: rc.Secret}, nil },
	SenderQuay:            newQuaySender,
	SenderACR:             newACRSender,
	SenderGAR:             newGARSender,
	SenderECR:             newECRSender,
	SenderArtifactory:     newArtifactorySender,
	SenderNexus:           newNexusSender,
	SenderGitLab:          newGitLabSender,
	SenderGitea:           newGiteaSender,
	SenderForgejo:         newGiteaSender,
	SenderBitbucket:       newBitbucketSender,
	SenderBitbucketServer: newBitbucketServerSender,
	SenderFlagger:         func(rc ReceiverConfig) (Sender, error) { return FlaggerSender{Secret: rc.Secret}, nil },
	SenderTekton:          newTektonSender,
	SenderCloudEvents:     newCloudEventsSender,
}

// SenderTypes lists the sender types [NewSender] knows, sorted.
func SenderTypes() []string {
	types := make([]string, 0, len(senders))
	for t := range senders {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// NewSender builds the sender of rc.Type for rc. An unknown type is an error,
// and so is a receiver that is not Insecure and lacks its credentials.
func NewSender(rc ReceiverConfig) (Sender, error) {
	newSender, ok := senders[rc.Type]
	if !ok {
		return nil, fmt.Errorf("unknown sender type %q (known: %s)", rc.Type, strings.Join(SenderTypes(), ", "))
	}
	if !rc.Insecure {
		if err := checkCredentials(rc); err != nil {
			return nil, err
		}
	}
	s, err := newSender(rc)
	if err != nil {
		return nil, fmt.Errorf("sender %s: %w", rc.Type, err)
	}
	return s, nil
}

// credentialChecks holds the credential checks of senders whose credentials
// are not a shared secret. Every other sender needs ReceiverConfig.Secret.
var credentialChecks = map[string]func(rc ReceiverConfig) error{
	SenderGAR: checkGARCredentials,
}

func checkCredentials(rc ReceiverConfig) error {
	if check, ok := credentialChecks[rc.Type]; ok {
		return check(rc)
	}
	if rc.Secret == "" {
		return errors.New("no secret (set insecure to accept unauthenticated deliveries)")
	}
	return nil
}

// pathTokenUser is implemented by senders that authenticate with the token in
// /hooks/<receiver>/<token>. The intake answers 404 to a token path for any
// other sender.
type pathTokenUser interface {
	usesPathToken() bool
}

func usesPathToken(s Sender) bool {
	p, ok := s.(pathTokenUser)
	return ok && p.usesPathToken()
}

// unauthenticated builds a permanent authentication failure.
func unauthenticated(reason string) error {
	return fault.Permanent(fmt.Errorf("%w: %s", ErrUnauthenticated, reason))
}

// malformed builds a permanent parse failure.
func malformed(format string, args ...any) error {
	return fault.Permanent(fmt.Errorf(format, args...))
}

// secureEqual compares two secrets in constant time. Hashing first keeps the
// comparison constant-time in the length too.
func secureEqual(got, want string) bool {
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// mediaType returns the media type of d's Content-Type without parameters,
// lower-cased; "" when absent.
func mediaType(d *Delivery) (string, error) {
	ct := d.Header.Get("Content-Type")
	if ct == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", fault.Permanent(fmt.Errorf("%w: parsing Content-Type %q: %w", ErrUnsupportedMediaType, ct, err))
	}
	return mt, nil
}

// hookSource is the CloudEvents source of events that entered through
// receiver.
func hookSource(receiver string) string { return "/hooks/" + receiver }

// eventTime picks the time of an occurrence: the sender's, else when the
// delivery was received. A sender's time outside years 1-9999 in UTC is no
// time at all (a zero, a garbled or a hostile value): RFC 3339, the
// CloudEvents time format, cannot carry it, and an event that cannot be read
// back must never reach the journal; the received time stands in for it.
func eventTime(sender time.Time, d *Delivery) time.Time {
	if !sender.IsZero() && ValidTime(sender) {
		return sender.UTC()
	}
	if !d.ReceivedAt.IsZero() && ValidTime(d.ReceivedAt) {
		return d.ReceivedAt.UTC()
	}
	return time.Now().UTC()
}

// ValidTime tells whether t, in UTC, falls within years 1-9999: the times a
// CloudEvent can carry (RFC 3339) and read back.
func ValidTime(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}
