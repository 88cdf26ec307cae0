package fault_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"marked", fault.Permanent(base), true},
		{"wrapped", fmt.Errorf("decoding: %w", fault.Permanent(base)), true},
		{"joined", errors.Join(errors.New("other"), fault.Permanent(base)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fault.IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if fault.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	if err := fault.Permanent(base); !errors.Is(err, base) || err.Error() != base.Error() {
		t.Errorf("Permanent(%v) = %v: does not wrap it", base, err)
	}
}

func TestStatus(t *testing.T) {
	type answer struct {
		Status  int
		Outcome string
		OK      bool
	}
	tests := []struct {
		name string
		err  error
		want answer
	}{
		{"not found", fault.New(fault.ErrNotFound, "no such receiver"), answer{404, "not_found", true}},
		{"wrapped kind", fmt.Errorf("rollout r1: %w", fault.New(fault.ErrNotFound, "rollout not found")), answer{404, "not_found", true}},
		{"unauthenticated", fault.New(fault.ErrUnauthenticated, "wrong token"), answer{401, "unauthenticated", true}},
		{"forbidden", fault.New(fault.ErrForbidden, "missing header"), answer{403, "forbidden", true}},
		{"a kind beats permanent", fault.Permanent(fault.New(fault.ErrUnauthenticated, "x")), answer{401, "unauthenticated", true}},
		{"too large", &http.MaxBytesError{Limit: 1}, answer{413, "too_large", true}},
		{"rate limited", fault.New(fault.ErrRateLimited, "slow down"), answer{429, "rate_limited", true}},
		{"conflict", fault.New(fault.ErrConflict, "nothing to retry"), answer{409, "conflict", true}},
		{"permanent", fault.Permanent(errors.New("bad json")), answer{400, "malformed", true}},
		{"anything else", errors.New("disk full"), answer{503, "", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, o, ok := fault.Status(tt.err)
			if diff := cmp.Diff(tt.want, answer{s, o, ok}); diff != "" {
				t.Errorf("Status(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
	// The message is the error's own.
	if got := fault.New(fault.ErrNotFound, "no such receiver").Error(); got != "no such receiver" {
		t.Errorf("Error() = %q", got)
	}
}
