package gates

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Approval is a manual verdict on a rollout, for one cluster or all.
type Approval struct {
	Status Status    `json:"status"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

func (a Approval) by() string {
	if a.By == "" {
		return ""
	}
	return " by " + a.By
}

// Documents is the part of the store the approvals live in (pkg/store).
type Documents interface {
	Get(ctx context.Context, collection, key string, v any) (bool, error)
	Put(ctx context.Context, collection, key string, v any) error
	Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error
}

// Store collections.
const (
	collectionApprovals = "approvals"
	collectionFirstSeen = "gates-first-seen"
)

// StoreApprovals keeps approvals and first-seen times in the store.
type StoreApprovals struct{ docs Documents }

// NewStoreApprovals returns approvals kept in docs.
func NewStoreApprovals(docs Documents) *StoreApprovals { return &StoreApprovals{docs: docs} }

var _ Approvals = (*StoreApprovals)(nil)

// ErrInvalidApproval is wrapped by the error of an approval that cannot be
// recorded.
var ErrInvalidApproval = errors.New("invalid approval")

// Approve records a verdict for the rollout in cluster ("" for every
// cluster of the rollout). The last verdict wins.
func (s *StoreApprovals) Approve(ctx context.Context, rolloutID, cluster string, a Approval) error {
	if rolloutID == "" {
		return fmt.Errorf("%w: no rollout id", ErrInvalidApproval)
	}
	if a.Status != StatusValid && a.Status != StatusInvalid {
		return fmt.Errorf("%w: status %q, want valid or invalid", ErrInvalidApproval, a.Status)
	}
	return s.docs.Put(ctx, collectionApprovals, approvalKey(rolloutID, cluster), a)
}

// Approval implements [Approvals].
func (s *StoreApprovals) Approval(ctx context.Context, rolloutID, cluster string) (Approval, bool, error) {
	for _, key := range []string{approvalKey(rolloutID, cluster), approvalKey(rolloutID, "")} {
		var a Approval
		found, err := s.docs.Get(ctx, collectionApprovals, key, &a)
		if err != nil || found {
			return a, found, err
		}
	}
	return Approval{}, false, nil
}

// FirstSeen implements [Approvals].
func (s *StoreApprovals) FirstSeen(ctx context.Context, key string, now time.Time) (time.Time, error) {
	var first time.Time
	err := s.docs.Update(ctx, collectionFirstSeen, key, &first, func(found bool) error {
		if !found {
			first = now
		}
		return nil
	})
	return first, err
}

func approvalKey(rolloutID, cluster string) string { return rolloutID + "/" + cluster }
