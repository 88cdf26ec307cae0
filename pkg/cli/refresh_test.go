package cli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// What `flotilla refresh` prints of the API's answer.
func TestPrintRefresh(t *testing.T) {
	tests := []struct {
		name string
		res  refreshResponse
		want string
	}{{
		name: "fed in",
		res:  refreshResponse{Application: "podinfo", Image: "r.test/demo/podinfo", Tags: 4, Newest: "1.1.0", Digest: "sha256:ab", Started: true, EventID: "poll/1"},
		want: "application podinfo: 4 tags in r.test/demo/podinfo\nnewest: 1.1.0 (sha256:ab), fed in as a push (event poll/1): its rollout will say source: poll\n",
	}, {
		name: "fed in before",
		res:  refreshResponse{Application: "podinfo", Image: "r.test/demo/podinfo", Tags: 4, Newest: "1.1.0", Digest: "sha256:ab", Reason: "1.1.0 was fed in before (event poll/1)"},
		want: "application podinfo: 4 tags in r.test/demo/podinfo\nnewest: 1.1.0 (sha256:ab), not started: 1.1.0 was fed in before (event poll/1)\n",
	}, {
		name: "nothing newer",
		res:  refreshResponse{Application: "podinfo", Image: "r.test/demo/podinfo", Tags: 4, Reason: "none of the 4 tags is newer than 1.1.0 that the application takes"},
		want: "application podinfo: 4 tags in r.test/demo/podinfo\nnothing to start: none of the 4 tags is newer than 1.1.0 that the application takes\n",
	}, {
		name: "a release set of image members",
		res: refreshResponse{Application: "shop", Image: "r.test/shop/api, r.test/shop/web", Tags: 5, Newest: "shop-api:1.1.0", Digest: "sha256:ab", Started: true,
			EventID: "poll/1", Reason: "shop-web: none of the 2 tags is newer than 1.0.0 that the application takes",
			Members: []refreshResponse{
				{Application: "shop-api", Image: "r.test/shop/api", Tags: 3, Newest: "1.1.0", Digest: "sha256:ab", Started: true, EventID: "poll/1"},
				{Application: "shop-web", Image: "r.test/shop/web", Tags: 2, Reason: "none of the 2 tags is newer than 1.0.0 that the application takes"},
			}},
		want: "release set shop: 5 tags in 2 members' repositories\n" +
			"member shop-api: 3 tags in r.test/shop/api\nnewest: 1.1.0 (sha256:ab), fed in as a push (event poll/1): its rollout will say source: poll\n" +
			"member shop-web: 2 tags in r.test/shop/web\nnothing to start: none of the 2 tags is newer than 1.0.0 that the application takes\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printRefresh(&b, tt.res)
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("printRefresh (-want +got):\n%s", diff)
			}
		})
	}
}
