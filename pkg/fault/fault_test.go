package fault_test

import (
	"errors"
	"fmt"
	"testing"

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
