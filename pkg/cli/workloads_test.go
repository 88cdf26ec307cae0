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

// describe shows a release set of image members' version and the one
// before it, each member's; none for a set of git members.
func TestDescribeReleaseSetVersions(t *testing.T) {
	api := rollout.MemberVersion{Application: "shop-api", Image: "registry.test/shop/api", Tag: "1.1.0", Digest: "sha256:0123456789abcdef0123"}
	fe := rollout.MemberVersion{Application: "shop-frontend", Image: "registry.test/shop/frontend", Tag: "1.0.0", Digest: "sha256:fedcba9876543210fedc"}
	r := rollout.Rollout{ID: "shop-1", Application: "shop", Phase: rollout.Progressing, Members: []string{"shop-api", "shop-frontend"},
		Versions: rollout.SetVersion{api, fe}}
	var b strings.Builder
	DescribeRollout(&b, r)
	for _, want := range []string{
		"Versions:     shop-api 1.1.0 (" + short(api.Digest) + "), shop-frontend 1.0.0 (" + short(fe.Digest) + ")\n",
		"Previous:     -\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe of an image set's rollout has no %q:\n%s", want, b.String())
		}
	}
	r.Versions = nil
	b.Reset()
	DescribeRollout(&b, r)
	if strings.Contains(b.String(), "Versions:") {
		t.Errorf("describe of a git set's rollout names versions:\n%s", b.String())
	}
}

// describe shows a release set's Jobs per cluster beside the canaries'
// phases, a failed one with its reason; no JOBS column without Jobs.
func TestDescribeReleaseSetJobs(t *testing.T) {
	r := rollout.Rollout{ID: "shop-1", Application: "shop", Phase: rollout.Progressing, Members: []string{"shop-migrate", "shop-api"}, Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{
		{Name: "c1", Phase: rollout.ClusterSucceeded, Jobs: map[string]string{"shop-migrate": "complete"}, Workloads: map[string]string{"shop-api": "Succeeded", "shop-web": "Succeeded"}},
		{Name: "c2", Phase: rollout.ClusterFailed, Jobs: map[string]string{"shop-migrate": "failed: DeadlineExceeded"}},
	}}}}
	var b strings.Builder
	DescribeRollout(&b, r)
	for _, want := range []string{" JOBS ", "shop-migrate=complete", "shop-migrate=failed: DeadlineExceeded"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe of a release set's rollout has no %q:\n%s", want, b.String())
		}
	}
	for i := range r.Waves[0].Clusters {
		r.Waves[0].Clusters[i].Jobs = nil
	}
	b.Reset()
	DescribeRollout(&b, r)
	if strings.Contains(b.String(), "JOBS") {
		t.Errorf("describe without Jobs has a JOBS column:\n%s", b.String())
	}
}
