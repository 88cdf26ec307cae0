package app

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/poll"
)

// The API's answer to a refresh carries what the poll found, of a
// release set of image members each member's too.
func TestRefreshResponse(t *testing.T) {
	at := time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC)
	res := poll.Result{Application: "shop", Image: "r.test/api, r.test/web", Tags: 5, Newest: "shop-api:1.1.0", Digest: "sha256:ab", Started: true,
		EventID: "poll/1", Reason: "shop-web: nothing newer", At: at, Members: []poll.Result{
			{Application: "shop-api", Image: "r.test/api", Tags: 3, Newest: "1.1.0", Digest: "sha256:ab", Started: true, EventID: "poll/1", At: at},
			{Application: "shop-web", Image: "r.test/web", Tags: 2, Reason: "nothing newer", At: at},
		}}
	want := api.RefreshResponse{Application: "shop", Image: "r.test/api, r.test/web", Tags: 5, Newest: "shop-api:1.1.0", Digest: "sha256:ab", Started: true,
		EventID: "poll/1", Reason: "shop-web: nothing newer", At: at, Members: []api.RefreshMember{
			{Application: "shop-api", Image: "r.test/api", Tags: 3, Newest: "1.1.0", Digest: "sha256:ab", Started: true, EventID: "poll/1"},
			{Application: "shop-web", Image: "r.test/web", Tags: 2, Reason: "nothing newer"},
		}}
	if diff := cmp.Diff(want, RefreshResponse(res)); diff != "" {
		t.Errorf("RefreshResponse (-want +got):\n%s", diff)
	}
	if got := RefreshResponse(poll.Result{Application: "podinfo"}); got.Members != nil {
		t.Errorf("an application's answer has members %v", got.Members)
	}
}
