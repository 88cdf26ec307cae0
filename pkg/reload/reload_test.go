package reload

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

func cfgOf(listen string, apps ...string) *config.Config {
	c := &config.Config{Server: config.Server{Listen: listen}}
	for _, a := range apps {
		c.Applications = append(c.Applications, config.Application{Name: a, Image: "registry.example.com/" + a})
	}
	return c
}

// TestReload: the configuration is built and validated first; an invalid
// one, or one that needs a restart, leaves the running one in force (and
// the metrics say so); a valid one is swapped in whole.
func TestReload(t *testing.T) {
	running := cfgOf("127.0.0.1:8080", "a", "b")
	changedB := cfgOf("127.0.0.1:8080", "a", "b", "c")
	changedB.Applications[1].Image += "-2"
	changedB.Applications = changedB.Applications[1:] // a removed, b changed, c added
	tests := []struct {
		name    string
		next    *config.Config
		err     error
		guard   error
		want    Result
		inForce *config.Config
		metrics map[Outcome]float64
		ok      float64
	}{
		{name: "invalid", err: errors.New("validating config: applications[0].track: unknown"),
			want: Result{Outcome: Invalid}, inForce: running, metrics: map[Outcome]float64{Invalid: 1}},
		{name: "a restart needed", next: cfgOf("127.0.0.1:9999", "a", "b", "c"),
			want: Result{Outcome: RestartNeeded, Fields: []string{"server.listen"}}, inForce: running, metrics: map[Outcome]float64{RestartNeeded: 1}},
		{name: "refused by the guard", next: changedB, guard: errors.New("applications[a]: removed while its rollout r1 is in flight"),
			want: Result{Outcome: Invalid}, inForce: running, metrics: map[Outcome]float64{Invalid: 1}},
		{name: "applied", next: changedB,
			want:    Result{Outcome: Applied, Added: []string{"c"}, Removed: []string{"a"}, Changed: []string{"b"}},
			inForce: changedB, metrics: map[Outcome]float64{Applied: 1}, ok: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := config.NewLive(running)
			reg := prometheus.NewRegistry()
			var followed *config.Config
			r, err := New(live, Options{Metrics: reg, Follow: func(_ context.Context, _ string, c *config.Config) { followed = c },
				Guard: func(context.Context, *config.Config, *config.Config) error { return tc.guard }})
			if err != nil {
				t.Fatal(err)
			}
			got := r.Reload(t.Context(), "test", func() (*config.Config, error) { return tc.next, tc.err })
			if (got.Err != nil) != (tc.want.Outcome == Invalid) {
				t.Errorf("Err = %v with outcome %s", got.Err, got.Outcome)
			}
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Reload (-want +got):\n%s", diff)
			}
			if live.Current() != tc.inForce {
				t.Errorf("in force after the reload: %+v, want %+v", live.Current(), tc.inForce)
			}
			if tc.want.Outcome == Applied && followed != tc.next {
				t.Error("Follow was not called with the configuration swapped in")
			} else if tc.want.Outcome != Applied && followed != nil {
				t.Error("Follow was called for a configuration refused")
			}
			for _, o := range []Outcome{Applied, Invalid, RestartNeeded} {
				if got := testutil.ToFloat64(r.reloads.WithLabelValues(string(o))); got != tc.metrics[o] {
					t.Errorf("flotilla_config_reloads_total{result=%q} = %v, want %v", o, got, tc.metrics[o])
				}
			}
			if got := testutil.ToFloat64(r.successful); got != tc.ok {
				t.Errorf("flotilla_config_last_reload_successful = %v, want %v", got, tc.ok)
			}
		})
	}
}
