package intake

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func TestGitHubPackageParse(t *testing.T) {
	published := fixture(t, "ghcr", "package_published.json")
	wantPublished := events.ImagePushed{
		Registry:   "ghcr.io",
		Repository: "shop/api",
		Tag:        "1.4.2",
		Digest:     "sha256:3da1a2f8e3b6c45d0e4f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7",
		MediaType:  "application/vnd.oci.image.manifest.v1+json",
		Pusher:     "ci-bot",
		Sender:     "github",
		Receiver:   "gh",
		DeliveryID: githubDeliveryID,
	}
	tests := []struct {
		name        string
		d           *Delivery
		want        []events.ImagePushed
		wantTime    time.Time
		wantIgnored string
		wantErr     error
	}{
		{
			name:     "repository hook, published",
			d:        githubDelivery("package", published, "application/json"),
			want:     []events.ImagePushed{wantPublished},
			wantTime: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		},
		{
			name:     "repository hook, form-encoded",
			d:        githubDelivery("package", formEncoded(published), "application/x-www-form-urlencoded"),
			want:     []events.ImagePushed{wantPublished},
			wantTime: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		},
		{
			name: "GitHub App, mixed-case owner, package_url with a trailing colon, digest from the manifest",
			d:    githubDelivery("registry_package", fixture(t, "ghcr", "registry_package_published.json"), "application/json"),
			want: []events.ImagePushed{{
				Registry:   "ghcr.io",
				Repository: "shop-team/checkout-worker",
				Tag:        "v2.0.0",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				MediaType:  "application/vnd.oci.image.index.v1+json",
				Pusher:     "release-app[bot]",
				Sender:     "github",
				Receiver:   "gh",
				DeliveryID: githubDeliveryID,
			}},
			wantTime: time.Date(2026, 1, 3, 9, 30, 2, 0, time.UTC),
		},
		{
			name: "GHES updated, registry host from package_url, digest from the version",
			d:    githubDelivery("package", fixture(t, "ghcr", "package_updated_ghes.json"), "application/json"),
			want: []events.ImagePushed{{
				Registry:   "containers.github.example.com",
				Repository: "payments/web",
				Tag:        "stable",
				Digest:     "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
				MediaType:  "application/vnd.docker.distribution.manifest.v2+json",
				Pusher:     "hubot",
				Sender:     "github",
				Receiver:   "gh",
				DeliveryID: githubDeliveryID,
			}},
			wantTime: time.Date(2026, 1, 4, 11, 20, 45, 0, time.UTC),
		},
		{
			name: "object under the other name, no namespace: repository from package_url, no time",
			d: githubDelivery("registry_package", []byte(`{"action":"published","package":{"package_type":"Container",
				"package_version":{"package_url":"ghcr.io/Acme/API:1","container_metadata":{"tag":{"name":"1"}}}}}`), "application/json"),
			want:     []events.ImagePushed{{Registry: "ghcr.io", Repository: "acme/api", Tag: "1", Sender: "github", Receiver: "gh", DeliveryID: githubDeliveryID}},
			wantTime: received,
		},
		{
			name: "escaped nested name",
			d: githubDelivery("package", []byte(`{"action":"published","package":{"name":"api%2Fworker","namespace":"shop","package_type":"CONTAINER",
				"package_version":{"version":"sha256:ab","container_metadata":{"tag":{"name":"1"}}}}}`), "application/json"),
			want:     []events.ImagePushed{{Registry: "ghcr.io", Repository: "shop/api/worker", Tag: "1", Digest: "sha256:ab", Sender: "github", Receiver: "gh", DeliveryID: githubDeliveryID}},
			wantTime: received,
		},
		{name: "untagged manifest", d: githubDelivery("package", fixture(t, "ghcr", "untagged.json"), "application/json"), wantIgnored: "untagged push"},
		{name: "npm package", d: githubDelivery("package", fixture(t, "ghcr", "npm_published.json"), "application/json"), wantIgnored: `package type "npm"`},
		{
			name:        "other action",
			d:           githubDelivery("registry_package", []byte(`{"action":"default","registry_package":{"package_type":"CONTAINER"}}`), "application/json"),
			wantIgnored: `package action "default"`,
		},
		{name: "no package object", d: githubDelivery("package", []byte(`{"action":"published"}`), "application/json"), wantErr: errAny},
		{
			name:    "no package_version",
			d:       githubDelivery("package", []byte(`{"action":"published","package":{"name":"api","namespace":"shop","package_type":"CONTAINER"}}`), "application/json"),
			wantErr: errAny,
		},
		{
			name: "no repository anywhere",
			d: githubDelivery("package", []byte(`{"action":"published","package":{"package_type":"CONTAINER",
				"package_version":{"container_metadata":{"tag":{"name":"1"}}}}}`), "application/json"),
			wantErr: errAny,
		},
		{name: "not JSON", d: githubDelivery("package", published[:40], "application/json"), wantErr: errAny},
		{name: "wrong field type", d: githubDelivery("package", []byte(`{"action":"published","package":[]}`), "application/json"), wantErr: errAny},
		{name: "unsupported content type", d: githubDelivery("package", published, "text/plain"), wantErr: ErrUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := GitHubSender{}.Parse(tt.d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, payloads[events.ImagePushed](t, res.Events)); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			for i, e := range res.Events {
				p := tt.want[i]
				if e.ID() != "gh/github/"+githubDeliveryID || e.Type() != events.TypeImagePushed || e.Source() != "/hooks/gh" ||
					e.Subject() != p.Image()+":"+p.Tag || !e.Time().Equal(tt.wantTime) {
					t.Errorf("event id %q type %q source %q subject %q time %v", e.ID(), e.Type(), e.Source(), e.Subject(), e.Time())
				}
			}
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			if res.DeliveryID != githubDeliveryID {
				t.Errorf("DeliveryID = %q", res.DeliveryID)
			}
		})
	}
}

func TestGitHubPackageReplay(t *testing.T) {
	body := fixture(t, "ghcr", "package_published.json")
	first, err := GitHubSender{}.Parse(githubDelivery("package", body, "application/json"))
	if err != nil {
		t.Fatal(err)
	}
	again := githubDelivery("package", body, "application/json")
	again.ReceivedAt = received.Add(time.Hour)
	second, err := GitHubSender{}.Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 1 || len(second.Events) != 1 || first.Events[0].ID() != second.Events[0].ID() {
		t.Fatalf("a redelivery yields other ids: %v, %v", first.Events, second.Events)
	}
	other := githubDelivery("package", body, "application/json")
	other.Header.Set("X-GitHub-Delivery", "0b4c8f10-e7a1-11f0-9a1c-3e2f1b4d5c6a")
	third, err := GitHubSender{}.Parse(other)
	if err != nil {
		t.Fatal(err)
	}
	if third.Events[0].ID() == first.Events[0].ID() {
		t.Errorf("another delivery yields the same id %q", first.Events[0].ID())
	}
}

func TestGHCRPackageURL(t *testing.T) {
	tests := []struct {
		raw, wantRegistry, wantRepo string
	}{
		{"ghcr.io/acme/api:1.4.2", "ghcr.io", "acme/api"},
		{"ghcr.io/acme/api:", "ghcr.io", "acme/api"},
		{"ghcr.io/Acme/team/api@sha256:ab", "ghcr.io", "acme/team/api"},
		{"https://registry.example.com:5000/acme/api:1", "registry.example.com:5000", "acme/api"},
		{"localhost/acme/api", "localhost", "acme/api"},
		{"acme/api:1", "ghcr.io", ""},
		{"", "ghcr.io", ""},
		{":", "ghcr.io", ""},
	}
	for _, tt := range tests {
		registry, repo := ghcrPackageURL(tt.raw)
		if registry != tt.wantRegistry || repo != tt.wantRepo {
			t.Errorf("ghcrPackageURL(%q) = %q, %q; want %q, %q", tt.raw, registry, repo, tt.wantRegistry, tt.wantRepo)
		}
	}
}

func TestGitHubPackageAuthenticate(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	body := fixture(t, "ghcr", "registry_package_published.json")
	modified := append([]byte(nil), body...)
	modified[len(modified)-3] = 'X'
	tests := []struct {
		name      string
		body      []byte
		signature string // "" leaves the header out
		wantOK    bool
	}{
		{"right secret", body, githubSign(secret, body), true},
		{"wrong secret", body, githubSign("guess", body), false},
		{"missing header", body, "", false},
		{"body changed after signing", modified, githubSign(secret, body), false},
		{"truncated signature", body, githubSign(secret, body)[:30], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := githubDelivery("registry_package", tt.body, "application/json")
			if tt.signature != "" {
				d.Header.Set("X-Hub-Signature-256", tt.signature)
			}
			checkAuth(t, GitHubSender{Secret: secret}, d, tt.wantOK)
		})
	}
	t.Run("empty secret never matches", func(t *testing.T) {
		d := githubDelivery("package", body, "application/json")
		d.Header.Set("X-Hub-Signature-256", githubSign("", body))
		checkAuth(t, GitHubSender{}, d, false)
	})
}

func FuzzGitHubPackageParse(f *testing.F) {
	seedFixtures(f, "ghcr")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []*Delivery{
			githubDelivery("package", body, "application/json"),
			githubDelivery("registry_package", body, "application/json"),
			githubDelivery("package", body, "application/x-www-form-urlencoded"),
		} {
			res, err := GitHubSender{}.Parse(d)
			checkFuzzResult(t, res, err)
		}
	})
}
