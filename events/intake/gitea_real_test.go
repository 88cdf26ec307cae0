package intake

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
)

// What Gitea 1.27.3 (pkg/testkit/giteatest) really sent to a repository
// webhook of type gitea, content type json, secret giteaRealSecret, on
// pushes made with git (captured 2026-12-02, #32): the bodies byte for
// byte in testdata/gitea/gitea-1.27.3, and the headers below. The other
// gitea fixtures are written by hand; these catch a receiver that reads
// only the hand-built shape.
const giteaRealSecret = "s3cret"

// giteaRealDelivery is one captured delivery: every header Gitea set but
// the transport's (Content-Length, Accept-Encoding), with its values.
func giteaRealDelivery(t *testing.T, file, id, sig, sha1 string) *Delivery {
	t.Helper()
	return &Delivery{
		Receiver: "gitea",
		Header: header(
			"Content-Type", "application/json",
			"User-Agent", "Go-http-client/1.1",
			"X-Gitea-Delivery", id, "X-Gogs-Delivery", id, "X-Github-Delivery", id,
			"X-Gitea-Event", "push", "X-Gogs-Event", "push", "X-Github-Event", "push",
			"X-Gitea-Event-Type", "push", "X-Gogs-Event-Type", "push", "X-Github-Event-Type", "push",
			"X-Gitea-Hook-Installation-Target-Type", "repository",
			"X-Github-Hook-Installation-Target-Type", "repository",
			"X-Gitea-Signature", sig, "X-Gogs-Signature", sig,
			"X-Hub-Signature-256", "sha256="+sig, "X-Hub-Signature", "sha1="+sha1,
		),
		Body:       fixture(t, "gitea", "gitea-1.27.3/"+file),
		ReceivedAt: received,
	}
}

func TestGiteaRealPushes(t *testing.T) {
	const (
		repo   = "http://127.0.0.1:31195/flotilla/deployments.git"
		first  = "af6a16fd60d9a962e83f5a23421c9ea895b4a5ca"
		second = "84c5bbce6d0465c400fe1da3c95898a88bc8fbfe"
		tenth  = "9c02376c3c3269ca902ef0223594bbbd4dd21ea2"
		null   = "0000000000000000000000000000000000000000"
	)
	tests := []struct {
		name                string
		file, id, sig, sha1 string
		want                events.GitPushed
	}{
		{
			name: "first push of main: before is null, every file added",
			file: "push_first.json", id: "6ad84957-340f-402e-b849-0272fa21172f",
			sig:  "06d40b33b272f6ded44a2d54d0ecac69f42e7c282e7b1961ea9c2c5f9fe006f4",
			sha1: "2682066e7e86aebf9a1379895b46e578fd55e691",
			want: events.GitPushed{RepoURL: repo, Ref: "refs/heads/main", Branch: "main", Before: null, After: first,
				ChangedPaths: []string{"README.md", "charts/podinfo/values.yaml"}},
		},
		{
			name: "a commit modifying a file",
			file: "push.json", id: "6b5aff1e-a6d6-4107-9d0d-902586ad6dd8",
			sig:  "3a2d9970ac9721e178fa82bbfe1f8d1c044723a51bac177017dd039ec8384a1b",
			sha1: "c3b841bab68ac09e057534fb3389cbea5f38e77a",
			want: events.GitPushed{RepoURL: repo, Ref: "refs/heads/main", Branch: "main", Before: first, After: second,
				ChangedPaths: []string{"charts/podinfo/values.yaml"}},
		},
		{
			// Gitea listed 5 of the push's 8 commits (FEED_MAX_COMMIT_NUM).
			name: "eight commits, five listed: no partial paths",
			file: "push_truncated.json", id: "a67b197d-49ee-4b8d-b9f9-c179aaf27330",
			sig:  "2ce2eb739eebe1dee60ac47bd6a9f35fb7bdc620c81c79c952fc85595eda66e7",
			sha1: "ba226c28fb433e496b20349eb4f5697499d19a0a",
			want: events.GitPushed{RepoURL: repo, Ref: "refs/heads/main", Branch: "main", Before: second, After: tenth},
		},
		{
			name: "tag pushed: no commits listed",
			file: "tag_push.json", id: "2b5b5e90-d2e2-4784-ba96-f9f212e4d8f4",
			sig:  "59184f5fef1d8e493315f166fa847e6bdc93453d3adc259bf023ce68379a3d63",
			sha1: "1bea5db314057f3fe5db2491646bf4c135a79007",
			want: events.GitPushed{RepoURL: repo, Ref: "refs/tags/v1", Tag: "v1", Before: null, After: tenth},
		},
	}
	s := GiteaSender{Secret: giteaRealSecret}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := giteaRealDelivery(t, tt.file, tt.id, tt.sig, tt.sha1)
			if err := s.Authenticate(context.Background(), d); err != nil {
				t.Fatalf("Authenticate of Gitea's own signature: %v", err)
			}
			forged := *d
			forged.Body = append([]byte(nil), d.Body...)
			forged.Body[len(forged.Body)-2] ^= 1
			if err := s.Authenticate(context.Background(), &forged); err == nil {
				t.Error("Authenticate accepted the body changed by one bit")
			}
			res, err := s.Parse(d)
			if err != nil {
				t.Fatal(err)
			}
			if res.Ignored != "" || len(res.Events) != 1 {
				t.Fatalf("got %d events, ignored %q; want one push", len(res.Events), res.Ignored)
			}
			e := res.Events[0]
			if want := "gitea/gitea/" + tt.id; e.ID() != want {
				t.Errorf("event id %q, want %q", e.ID(), want)
			}
			got, err := events.Decode[events.GitPushed](e)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Pusher, want.Sender, want.Receiver, want.DeliveryID = "flotilla", SenderGitea, "gitea", tt.id
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GitPushed (-want +got):\n%s", diff)
			}
		})
	}
}
