package intake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func artifactoryDelivery(body []byte, contentType string) *Delivery {
	return &Delivery{
		Receiver:   "jfrog",
		Header:     header("Content-Type", contentType, "User-Agent", "JFrog Event/7.104.5"),
		Body:       body,
		ReceivedAt: received,
	}
}

// artifactorySign is X-JFrog-Event-Auth of a webhook that signs its payload.
func artifactorySign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestArtifactoryParse(t *testing.T) {
	pushed := fixture(t, "artifactory", "docker_pushed.json")
	selfHosted := fixture(t, "artifactory", "docker_pushed_selfhosted.json")
	fromPath := []byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"dk","path":"/a/b/c/7/manifest.json","sha256":"SHA256:ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"},"jpd_origin":"registry.example.com"}`)
	key := func(body []byte) string { return "jfrog/artifactory/" + bodyKey(artifactoryDelivery(body, "")) }
	tests := []imageParseCase{
		{
			name:        "docker tag pushed",
			body:        pushed,
			contentType: "application/json",
			want: []events.ImagePushed{{
				Registry:   "acme.jfrog.io",
				Repository: "docker-local/shop/api",
				Tag:        "1.4.2",
				Digest:     "sha256:35c4a2c15539c6c1e4e5fa4e554dac323ad0107d8eb5c582d6ff386b383b7dce",
				Pusher:     "ci@example.com",
				Sender:     "artifactory",
				Receiver:   "jfrog",
			}},
			wantIDs: []string{key(pushed)},
		},
		{
			name:        "self-hosted with port, digest already prefixed, no content type",
			body:        selfHosted,
			contentType: "",
			want: []events.ImagePushed{{
				Registry:   "artifactory.internal:8082",
				Repository: "containers/team/app",
				Tag:        "v2.0.0",
				Digest:     "sha256:6666666666666666666666666666666666666666666666666666666666666666",
				Pusher:     "admin",
				Sender:     "artifactory",
				Receiver:   "jfrog",
			}},
			wantIDs: []string{key(selfHosted)},
		},
		{
			name:        "image and tag from the path, origin without scheme",
			body:        fromPath,
			contentType: "application/json",
			want: []events.ImagePushed{{
				Registry:   "registry.example.com",
				Repository: "dk/a/b/c",
				Tag:        "7",
				Digest:     "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
				Sender:     "artifactory",
				Receiver:   "jfrog",
			}},
			wantIDs: []string{key(fromPath)},
		},
		{
			name:        "placeholder checksum is no digest",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"r","image_name":"i","tag":"t","sha256":"sample_checksum"},"jpd_origin":"https://x.example"}`),
			contentType: "application/json",
			want:        []events.ImagePushed{{Registry: "x.example", Repository: "r/i", Tag: "t", Sender: "artifactory", Receiver: "jfrog"}},
		},
		{name: "docker tag deleted", body: fixture(t, "artifactory", "docker_deleted.json"), contentType: "application/json", wantIgnored: "docker deleted"},
		{name: "docker tag promoted", body: fixture(t, "artifactory", "docker_promoted.json"), contentType: "application/json", wantIgnored: "docker promoted"},
		{name: "artifact deployed", body: fixture(t, "artifactory", "artifact_deployed.json"), contentType: "application/json", wantIgnored: "artifact deployed"},
		{name: "build uploaded", body: fixture(t, "artifactory", "build_uploaded.json"), contentType: "application/json", wantIgnored: "build uploaded"},
		{name: "wrong content type", body: pushed, contentType: "application/xml", wantErr: ErrUnsupportedMediaType},
		{name: "not JSON", body: []byte(`{"domain":`), contentType: "application/json", wantErr: errAny},
		{name: "not an object", body: []byte(`[]`), contentType: "application/json", wantErr: errAny},
		{name: "no domain", body: []byte(`{"event_type":"pushed"}`), contentType: "application/json", wantErr: errAny},
		{
			name:        "push without jpd_origin",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"r","image_name":"i","tag":"t"}}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{
			name:        "push without repo_key",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":{"image_name":"i","tag":"t"},"jpd_origin":"https://x"}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{
			name:        "push without image name or path",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"r","tag":"t"},"jpd_origin":"https://x"}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{
			name:        "push without tag or path",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"r","image_name":"i"},"jpd_origin":"https://x"}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{
			name:        "data not an object",
			body:        []byte(`{"domain":"docker","event_type":"pushed","data":"x"}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
	}
	runImageParseCases(t, "artifactory", ArtifactorySender{}.Parse, func(body []byte) *Delivery { return artifactoryDelivery(body, "") }, tests)
}

func TestArtifactoryParseReplay(t *testing.T) {
	body := fixture(t, "artifactory", "docker_pushed.json")
	first, err := ArtifactorySender{}.Parse(artifactoryDelivery(body, "application/json"))
	if err != nil {
		t.Fatal(err)
	}
	again := artifactoryDelivery(append([]byte(nil), body...), "application/json")
	again.ReceivedAt = received.Add(time.Minute)
	second, err := ArtifactorySender{}.Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(registryEventIDs(first), registryEventIDs(second)); diff != "" || len(first.Events) != 1 {
		t.Errorf("ids differ on redelivery (-first +second):\n%s", diff)
	}
}

func TestArtifactoryAuthenticate(t *testing.T) {
	const secret = "jfrog-hook-s3cret"
	body := fixture(t, "artifactory", "docker_pushed.json")
	modified := []byte(strings.Replace(string(body), `"1.4.2"`, `"6.6.6"`, 1))
	tests := []struct {
		name   string
		body   []byte
		auth   string // "" leaves the header out
		secret string
		wantOK bool
	}{
		{"secret token", body, secret, secret, true},
		{"payload signature", body, artifactorySign(secret, body), secret, true},
		{"payload signature in upper case", body, strings.ToUpper(artifactorySign(secret, body)), secret, true},
		{"wrong token", body, "guess", secret, false},
		{"token as prefix", body, secret + "x", secret, false},
		{"signature with the wrong key", body, artifactorySign("guess", body), secret, false},
		{"signature over a modified body", modified, artifactorySign(secret, body), secret, false},
		{"truncated signature", body, artifactorySign(secret, body)[:40], secret, false},
		{"prefixed signature", body, "sha256=" + artifactorySign(secret, body), secret, false},
		{"missing header", body, "", secret, false},
		{"empty secret never matches a token", body, "x", "", false},
		{"empty secret never matches a signature", body, artifactorySign("", body), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := artifactoryDelivery(tt.body, "application/json")
			if tt.auth != "" {
				d.Header.Set("X-JFrog-Event-Auth", tt.auth)
			}
			checkAuth(t, ArtifactorySender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
}

func FuzzArtifactoryParse(f *testing.F) {
	seedFixtures(f, "artifactory")
	f.Add([]byte(`{"domain":"docker","event_type":"pushed","data":{"repo_key":"r","path":"///"},"jpd_origin":"%zz"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := artifactoryDelivery(body, "application/json")
		d.Header.Set("X-JFrog-Event-Auth", artifactorySign("k", body))
		if err := (ArtifactorySender{Secret: "k"}).Authenticate(t.Context(), d); err != nil {
			t.Fatalf("Authenticate of a signed body: %v", err)
		}
		res, err := ArtifactorySender{}.Parse(d)
		checkFuzzResult(t, res, err)
	})
}

func TestNewArtifactorySender(t *testing.T) {
	s, err := newArtifactorySender(ReceiverConfig{Name: "jfrog", Type: SenderArtifactory, Secret: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ArtifactorySender{Secret: "k"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
}
