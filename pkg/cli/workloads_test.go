package cli

import (
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// describe shows each canary of a git release of several workloads per
// cluster, and no WORKLOADS column for a rollout of one workload.
func TestDescribeWorkloads(t *testing.T) {
	r := rollout.Rollout{ID: "shop-1", Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{
		{Name: "c1", Phase: rollout.ClusterProgressing, CanaryPhase: "Progressing", Workloads: map[string]string{"web": "Succeeded", "web-worker": "Progressing"}},
	}}}}
	var b strings.Builder
	DescribeRollout(&b, r)
	if !strings.Contains(b.String(), "WORKLOADS") || !strings.Contains(b.String(), "web=Succeeded,web-worker=Progressing") {
		t.Errorf("describe of a release of two workloads:\n%s", b.String())
	}
	r.Waves[0].Clusters[0].Workloads = nil
	b.Reset()
	DescribeRollout(&b, r)
	if strings.Contains(b.String(), "WORKLOADS") {
		t.Errorf("describe of one workload has a WORKLOADS column:\n%s", b.String())
	}
}

// describe names a release set's members in the order each cluster
// applies them; an application's rollout has no Members line.
func TestDescribeReleaseSetMembers(t *testing.T) {
	r := rollout.Rollout{ID: "shop-1", Application: "shop", Phase: rollout.Progressing, Members: []string{"shop-migrate", "shop-api", "shop-frontend"}}
	var b strings.Builder
	DescribeRollout(&b, r)
	if !strings.Contains(b.String(), "Members:      shop-migrate -> shop-api -> shop-frontend\n") {
		t.Errorf("describe of a release set's rollout:\n%s", b.String())
	}
	r.Members = nil
	b.Reset()
	DescribeRollout(&b, r)
	if strings.Contains(b.String(), "Members:") {
		t.Errorf("describe of an application's rollout names members:\n%s", b.String())
	}
}
