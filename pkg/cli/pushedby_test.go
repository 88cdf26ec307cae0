package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/cli"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// describe rollout says who pushed the version, or that the sender named
// no one; a rollout no push started says nothing of it.
func TestDescribeRolloutPushedBy(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    rollout.Rollout
		want string
	}{
		{"a sender that names the pusher", rollout.Rollout{Source: rollout.SourceWebhook, PushedBy: "alice"}, "Pushed by:    alice\n"},
		{"a sender that names no one", rollout.Rollout{Source: rollout.SourcePoll},
			"Pushed by:    unknown (the sender named no one: separation of duties refuses no approver)\n"},
		{"a catch-up", rollout.Rollout{Source: rollout.SourceWebhook, Kind: rollout.KindCatchUp}, ""},
		{"a fleet rollback", rollout.Rollout{RollbackOf: "r1"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			cli.DescribeRollout(&b, tt.r)
			got := ""
			for _, l := range strings.SplitAfter(b.String(), "\n") {
				if strings.HasPrefix(l, "Pushed by:") {
					got = l
				}
			}
			if got != tt.want {
				t.Errorf("pushed by line %q, want %q", got, tt.want)
			}
		})
	}
}
