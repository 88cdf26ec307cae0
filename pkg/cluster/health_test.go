package cluster_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

func TestJudgeFlagger(t *testing.T) {
	now := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	canary := func(name, phase string, age time.Duration) flaggerv1.Canary {
		c := flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		c.Status.Phase = flaggerv1.CanaryPhase(phase)
		return c
	}
	type verdict struct {
		State             cluster.FlaggerState
		Canaries, Waiting int
		Detail            string
	}
	tests := []struct {
		name string
		cs   []flaggerv1.Canary
		want verdict
	}{
		{"no canaries", nil, verdict{State: cluster.FlaggerReady}},
		{"every canary taken up", []flaggerv1.Canary{canary("a", "Succeeded", time.Hour), canary("b", "Progressing", time.Minute)},
			verdict{State: cluster.FlaggerReady, Canaries: 2}},
		{"a new canary waits its grace", []flaggerv1.Canary{canary("a", "Succeeded", time.Hour), canary("b", "", 10*time.Second)},
			verdict{State: cluster.FlaggerReady, Canaries: 2}},
		{"canaries without a status past the grace", []flaggerv1.Canary{canary("a", "", time.Hour), canary("b", "", time.Minute), canary("c", "Succeeded", time.Hour)},
			verdict{State: cluster.FlaggerNotReady, Canaries: 3, Waiting: 2,
				Detail: "canary apps/a and 1 more without a status from Flagger after 30s: is Flagger running?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got verdict
			got.State, got.Canaries, got.Waiting, got.Detail = cluster.JudgeFlagger(tt.cs, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("JudgeFlagger (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHealthOfAnUnreachableCluster: a cluster whose API server does not
// answer is unreachable, within the read's bound, and said so again
// from the cache.
func TestHealthOfAnUnreachableCluster(t *testing.T) {
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: gone, context: {cluster: gone, user: u}}]
current-context: gone
`), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := cluster.NewSet([]config.Cluster{{Name: "gone", Kubeconfig: kc}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	start := time.Now()
	h := set.Health(t.Context(), "gone")
	if h.Reachable || h.Flagger != cluster.FlaggerUnknown || h.Detail == "" || time.Since(start) > 5*time.Second {
		t.Errorf("Health = %+v after %s, want unreachable with a reason, within 5s", h, time.Since(start))
	}
	if again := set.Health(t.Context(), "gone"); again.Checked != h.Checked {
		t.Errorf("a second read within the TTL read the cluster again: %v then %v", h.Checked, again.Checked)
	}
}
