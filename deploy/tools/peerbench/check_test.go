package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
)

func TestFails(t *testing.T) {
	failing := map[string]bool{"c2": true, "c3": true}
	bad := version{tag: "1.7.0", digest: "sha256:bad"}
	tests := []struct {
		name    string
		cluster string
		bad     version
		img     string
		want    bool
	}{
		{"the bad tag in a failing cluster", "c2", bad, "r/keel-webhook:1.7.0", true},
		{"the bad digest in a failing cluster", "c3", bad, "r/flotilla-waves@sha256:bad", true},
		{"the bad version in the first cluster", "c1", bad, "r/keel-webhook:1.7.0", false},
		{"another version in a failing cluster", "c2", bad, "r/keel-webhook:1.6.0", false},
		{"a flotilla revert to the previous digest", "c2", bad, "r/flotilla-waves@sha256:good", false},
		{"no bad version marked", "c2", version{}, "r/keel-webhook:1.7.0", false},
		{"the bad tag marked before its digest is known", "c2", version{tag: "1.7.0"}, "r/keel-webhook:1.7.0", true},
		{"a cluster the webhook did not name", "", bad, "r/keel-webhook:1.7.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fails(tt.cluster, failing, tt.bad, tt.img); got != tt.want {
				t.Errorf("fails = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChecker posts Flagger's payload to the check as Flagger does and
// reads the status Flagger judges by (above 202: the check failed).
func TestChecker(t *testing.T) {
	imgs := map[string]string{"c1/ns": "r/x:1.7.0", "c2/ns": "r/x:1.7.0", "c2/other": "r/y:1.7.0"}
	c, err := newChecker(t.Context(), []string{"c2"}, func(cluster, ns string) string { return imgs[cluster+"/"+ns] })
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	c.setBad("ns", version{tag: "1.7.0"})
	post := func(cluster, ns string) int {
		t.Helper()
		b, _ := json.Marshal(flaggerv1.CanaryWebhookPayload{Name: workload, Namespace: ns, Phase: flaggerv1.CanaryPhaseProgressing,
			Metadata: map[string]string{"cluster": cluster, "rollout": "r-1"}})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	got := map[string]int{"c1/ns": post("c1", "ns"), "c2/ns": post("c2", "ns"), "c2/other": post("c2", "other")}
	want := map[string]int{"c1/ns": 200, "c2/ns": 403, "c2/other": 200}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if _, ok := c.refusedIn("c2", "ns"); !ok {
		t.Error("the refusal in c2 is not recorded")
	}
	for _, k := range [][2]string{{"c1", "ns"}, {"c2", "other"}} {
		if at, ok := c.refusedIn(k[0], k[1]); ok {
			t.Errorf("a refusal recorded in %s/%s at %v", k[0], k[1], at)
		}
	}
}

func TestCheckHooks(t *testing.T) {
	md := func(kv ...string) *map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &m
	}
	in := []flaggerv1.CanaryWebhook{
		{Name: checkHook, Type: flaggerv1.RolloutHook, URL: "http://127.0.0.1:1/check", Metadata: md("cluster", "c2", "rollout", "r-9")},
		{Name: "flotilla-events", Type: flaggerv1.EventHook, URL: "http://127.0.0.1:2/hooks/flagger", Metadata: md("cluster", "c2")},
	}
	want := []flaggerv1.CanaryWebhook{
		{Name: checkHook, Type: flaggerv1.RolloutHook, URL: "http://127.0.0.1:1/check", Metadata: md("cluster", "c2")},
	}
	if diff := cmp.Diff(want, checkHooks(in, "c2")); diff != "" {
		t.Errorf("checkHooks (-want +got):\n%s", diff)
	}
}

func TestFirstSince(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var h []change
	for i, img := range []string{"r/x:1.0.0", "r/x:1.0.0", "r/x:1.1.0", "r/x@sha256:bad", "r/x:1.1.0"} {
		h = record(h, img, at(i))
	}
	if len(h) != 4 {
		t.Fatalf("history %v: the same image twice in a row is one change", h)
	}
	tests := []struct {
		name   string
		tag    string
		digest string
		from   time.Time
		want   time.Time
		wantOK bool
	}{
		{"the first change to a version", "1.1.0", "", at(0), at(2), true},
		{"back to it after a bad version", "1.1.0", "", at(3), at(4), true},
		{"by digest", "9.9.9", "sha256:bad", at(0), at(3), true},
		{"nothing since", "1.0.0", "", at(1), time.Time{}, false},
		{"never", "2.0.0", "", t0, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := firstSince(h, tt.tag, tt.digest, tt.from)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("firstSince = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFateText(t *testing.T) {
	f := failure{tag: "1.7.0", prev: "1.6.0", waited: 90 * time.Second, clusters: []clusterFate{
		{cluster: "c1", ranBad: true, backOK: true, settled: true, back: 12300 * time.Millisecond},
		{cluster: "c2", refused: true, settled: true},
		{cluster: "c3", takenBack: true, settled: true, back: 2500 * time.Millisecond},
		{cluster: "c4", ranBad: true},
		{cluster: "c5"},
	}}
	want := "c1: promoted, then 1.6.0 put back at 12.3 s; c2: the analysis failed it, Flagger kept 1.6.0 on the primary; " +
		"c3: its Deployment taken back at 2.5 s, before its analysis ended; the primary kept 1.6.0; " +
		"c4: promoted, still runs it 1m30s after the analysis failed it elsewhere (manual); c5: not settled after 1m30s"
	if got := fateText(f); got != want {
		t.Errorf("fateText =\n%q\nwant\n%q", got, want)
	}
}

func TestFateOf(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	prev := version{tag: "1.6.0", digest: "sha256:prev"}
	bad := version{tag: "1.7.0", digest: "sha256:bad"}
	h := func(kv ...any) []change {
		var out []change
		for i := 0; i < len(kv); i += 2 {
			out = append(out, change{image: kv[i].(string), at: at(kv[i+1].(int))})
		}
		return out
	}
	from := at(10)
	tests := []struct {
		name          string
		primary, spec []change
		refusedAt     time.Time
		want          clusterFate
	}{
		{"promoted, then put back (flotilla's rollback, by digest)",
			h("r@sha256:prev", 0, "r@sha256:bad", 15, "r@sha256:prev", 20), h("r@sha256:prev", 0, "r@sha256:bad", 11, "r@sha256:prev", 18), time.Time{},
			clusterFate{ranBad: true, backOK: true, settled: true, at: at(20)}},
		{"promoted, still running it (a peer: manual)",
			h("r:1.6.0", 0, "r:1.7.0", 15), h("r:1.6.0", 0, "r:1.7.0", 11), time.Time{},
			clusterFate{ranBad: true}},
		{"failed by the analysis, the spec left on it (a peer)",
			h("r:1.6.0", 0), h("r:1.6.0", 0, "r:1.7.0", 11), at(13),
			clusterFate{refused: true, settled: true, at: at(13)}},
		{"taken back before the analysis ended (flotilla's one wave)",
			h("r@sha256:prev", 0), h("r@sha256:prev", 0, "r@sha256:bad", 11, "r@sha256:prev", 13), time.Time{},
			clusterFate{takenBack: true, settled: true, at: at(13)}},
		{"in analysis",
			h("r:1.6.0", 0), h("r:1.6.0", 0, "r:1.7.0", 11), time.Time{},
			clusterFate{}},
		{"not reached yet",
			h("r:1.6.0", 0), h("r:1.6.0", 0), time.Time{},
			clusterFate{}},
		{"an old change to the bad tag before the push does not count",
			h("r:1.7.0", 1, "r:1.6.0", 2), h("r:1.6.0", 2), time.Time{},
			clusterFate{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fateOf(tt.primary, tt.spec, tt.refusedAt, bad, prev, from)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(clusterFate{})); diff != "" {
				t.Errorf("fateOf (-want +got):\n%s", diff)
			}
		})
	}
}
