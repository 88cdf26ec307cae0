package intake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// ceKey is the key of the event source+id.
func ceKey(source, id string) string {
	sum := sha256.Sum256([]byte(source + "\x00" + id))
	return "ce/cloudevents/" + hex.EncodeToString(sum[:])
}

// ceBinary is a binary-mode delivery: the CloudEvents attributes in ce-*
// headers (kv pairs without the prefix; empty values left out), body as
// data.
func ceBinary(body []byte, kv ...string) *Delivery {
	h := header("Content-Type", "application/json")
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			h.Set("Ce-"+kv[i], kv[i+1])
		}
	}
	return &Delivery{Receiver: "ce", Header: h, Body: body, ReceivedAt: received}
}

// ceStructured is a structured- or batch-mode delivery.
func ceStructured(body []byte, contentType string) *Delivery {
	return &Delivery{Receiver: "ce", Header: header("Content-Type", contentType), Body: body, ReceivedAt: received}
}

// cdeventBinary is a CDEvent as the CDEvents SDKs send it: binary mode, the
// CloudEvents attributes copied from the CDEvent context and subject.
func cdeventBinary(body []byte, id, source, typ, subject, at string) *Delivery {
	return ceBinary(body, "Specversion", "1.0", "Id", id, "Source", source, "Type", typ, "Subject", subject, "Time", at)
}

func TestCloudEventsParse(t *testing.T) {
	const (
		apiPurl  = "pkg:oci/api@sha256%3A0b31b1c02ff458ad9b7b81cbdf8f028bd54699fa151f221d1e8de6817db93427?repository_url=registry.example.com/shop&tag=1.4.2"
		apiID    = "5f1e6c2a-7b3d-4e8f-9a0b-1c2d3e4f5a6b"
		webPurl  = "pkg:oci/web@sha256%3A9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08?repository_url=registry.example.com%3A5000%2Fshop%2Fweb&tag=v2.0.0"
		batchID1 = "271069a8-fc18-44f1-b38f-9d70a1695819"
		batchID2 = "8c2f1d7e-51f0-4b0a-9d38-6a1e2f3b4c5d"
		batchID3 = "d3b1c2a0-7e6f-4a5b-8c9d-0e1f2a3b4c5d"
	)
	type want struct {
		id, subject, rollout string
		at                   time.Time
		payload              any
	}
	tests := []struct {
		name         string
		d            *Delivery
		want         []want
		wantIgnored  string
		wantDelivery string
		wantErr      error
	}{
		{
			name: "CDEvent artifact published 0.3.0, binary mode",
			d: cdeventBinary(fixture(t, "cloudevents", "cdevents_artifact_published.json"),
				apiID, "/tekton/ci/release-api", "dev.cdevents.artifact.published.0.3.0", apiPurl, "2026-01-02T15:04:05.25Z"),
			want: []want{{
				id: ceKey("/tekton/ci/release-api", apiID), subject: apiPurl,
				at: time.Date(2026, 1, 2, 15, 4, 5, 250e6, time.UTC),
				payload: events.ImagePushed{
					Registry: "registry.example.com", Repository: "shop/api", Tag: "1.4.2",
					Digest: "sha256:0b31b1c02ff458ad9b7b81cbdf8f028bd54699fa151f221d1e8de6817db93427",
					Pusher: "release-bot", Sender: "cloudevents", Receiver: "ce", DeliveryID: apiID,
				},
			}},
			wantDelivery: apiID,
		},
		{
			name: "CDEvent without CloudEvents time: the context timestamp",
			d: ceBinary(fixture(t, "cloudevents", "cdevents_artifact_published.json"),
				"Specversion", "1.0", "Id", apiID, "Source", "/tekton/ci/release-api", "Type", "dev.cdevents.artifact.published.0.1.1"),
			want: []want{{
				id: ceKey("/tekton/ci/release-api", apiID), subject: "registry.example.com/shop/api:1.4.2",
				at: time.Date(2026, 1, 2, 15, 4, 5, 250e6, time.UTC),
				payload: events.ImagePushed{
					Registry: "registry.example.com", Repository: "shop/api", Tag: "1.4.2",
					Digest: "sha256:0b31b1c02ff458ad9b7b81cbdf8f028bd54699fa151f221d1e8de6817db93427",
					Pusher: "release-bot", Sender: "cloudevents", Receiver: "ce", DeliveryID: apiID,
				},
			}},
			wantDelivery: apiID,
		},
		{
			name: "flotilla image push, structured mode, time subject and rollout kept",
			d:    ceStructured(fixture(t, "cloudevents", "image_pushed.json"), "application/cloudevents+json; charset=utf-8"),
			want: []want{{
				id: ceKey("https://ci.example.com/jobs/publish-api", "b7e2c1f0-3d4a-4b5c-9e8f-7a6b5c4d3e2f"), subject: "registry.example.com/shop/api:1.4.2",
				rollout: "ro-20260102-api-1.4.2", at: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
				payload: events.ImagePushed{
					Registry: "registry.example.com", Repository: "shop/api", Tag: "1.4.2",
					Digest:    "sha256:fea8895f450959fa676bcc1df0611ea93823a735a01205fd8622846041d0c7cf",
					MediaType: "application/vnd.oci.image.manifest.v1+json", Pusher: "ci",
					Sender: "cloudevents", Receiver: "ce", DeliveryID: "a1b2-0",
				},
			}},
			wantDelivery: "b7e2c1f0-3d4a-4b5c-9e8f-7a6b5c4d3e2f",
		},
		{
			name: "batch: the consumed events in order, the others skipped",
			d:    ceStructured(fixture(t, "cloudevents", "batch.json"), "application/cloudevents-batch+json"),
			want: []want{{
				id: ceKey("/ci/pipelines/release", batchID2), subject: webPurl, rollout: "ro-20260102-web-v2.0.0",
				at: time.Date(2026, 1, 2, 15, 4, 58, 0, time.UTC),
				payload: events.ImagePushed{
					Registry: "registry.example.com:5000", Repository: "shop/web", Tag: "v2.0.0",
					Digest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
					Pusher: "ci", Sender: "cloudevents", Receiver: "ce", DeliveryID: batchID2,
				},
			}, {
				id: ceKey("https://git.example.com/shop/deployments", batchID3), subject: "https://git.example.com/shop/deployments.git#refs/heads/main",
				at: received,
				payload: events.GitPushed{
					RepoURL: "https://git.example.com/shop/deployments.git", Ref: "refs/heads/main", Branch: "main",
					Before: "6113728f27ae82c7b1a177c8d03f9e96e0adf246", After: "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
					ChangedPaths: []string{"apps/web/values.yaml"}, Pusher: "octo-dev",
					Sender: "cloudevents", Receiver: "ce", DeliveryID: batchID3,
				},
			}},
			wantDelivery: batchID1,
		},
		{
			name:         "unconsumed type",
			d:            ceStructured(fixture(t, "cloudevents", "unconsumed.json"), "application/cloudevents+json"),
			wantIgnored:  "type dev.cdevents.service.deployed.0.2.0 is not consumed",
			wantDelivery: "e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b",
		},
		{
			name: "untagged artifact",
			d: cdeventBinary(fixture(t, "cloudevents", "cdevents_untagged.json"), "0f0c5b0e-1a2b-4c3d-8e9f-a0b1c2d3e4f5", "/ci/builds/9121",
				"dev.cdevents.artifact.published.0.2.0", "", "2026-01-02T16:00:00Z"),
			wantIgnored:  "untagged artifact",
			wantDelivery: "0f0c5b0e-1a2b-4c3d-8e9f-a0b1c2d3e4f5",
		},
		{
			name: "artifact that is not an image",
			d: ceBinary([]byte(`{"subject":{"id":"pkg:golang/mygit.com/myorg/myapp@234fd47e07d1004f0aed9c","content":{}}}`),
				"Specversion", "1.0", "Id", "g-1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.1.1"),
			wantIgnored:  "artifact pkg:golang is not a container image",
			wantDelivery: "g-1",
		},
		{
			name: "batch of skipped events, reasons once each",
			d: ceStructured([]byte(`[{"specversion":"1.0","id":"1","source":"/s","type":"a"},{"specversion":"1.0","id":"2","source":"/s","type":"a"},
				{"specversion":"1.0","id":"3","source":"/s","type":"b"}]`), "application/cloudevents-batch+json"),
			wantIgnored:  "type a is not consumed; type b is not consumed",
			wantDelivery: "1",
		},
		{
			name: "artifact published of an unknown minor version",
			d: ceBinary(fixture(t, "cloudevents", "cdevents_artifact_published.json"),
				"Specversion", "1.0", "Id", "v-1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.4.0"),
			wantIgnored:  "type dev.cdevents.artifact.published.0.4.0 is not consumed",
			wantDelivery: "v-1",
		},
		{
			name: "rollout id extension that is not a string",
			d: ceStructured([]byte(`{"specversion":"1.0","id":"n-1","source":"/s","type":"dev.flotilla.git.pushed.v1","rolloutid":42,
				"data":{"repoUrl":"https://g/r.git","ref":"refs/tags/v1","tag":"v1"}}`), "application/cloudevents+json"),
			want: []want{{
				id: ceKey("/s", "n-1"), subject: "https://g/r.git#refs/tags/v1", rollout: "42", at: received,
				payload: events.GitPushed{RepoURL: "https://g/r.git", Ref: "refs/tags/v1", Tag: "v1", Sender: "cloudevents", Receiver: "ce", DeliveryID: "n-1"},
			}},
			wantDelivery: "n-1",
		},
		{
			name: "image push without a tag",
			d: ceStructured([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"dev.flotilla.image.pushed.v1",
				"data":{"registry":"r","repository":"a/b"}}`), "application/cloudevents+json"),
			wantErr: errAny,
		},
		{
			name: "git push without a ref",
			d: ceStructured([]byte(`{"specversion":"1.0","id":"1","source":"/s","type":"dev.flotilla.git.pushed.v1",
				"data":{"repoUrl":"https://g/r.git"}}`), "application/cloudevents+json"),
			wantErr: errAny,
		},
		{
			name:    "image push without data",
			d:       ceBinary(nil, "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.flotilla.image.pushed.v1"),
			wantErr: errAny,
		},
		{
			name:    "CDEvent that is not JSON",
			d:       ceBinary([]byte(`<xml/>`), "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.3.0"),
			wantErr: errAny,
		},
		{
			name:    "CDEvent without subject id",
			d:       ceBinary([]byte(`{"subject":{"content":{}}}`), "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.3.0"),
			wantErr: errAny,
		},
		{
			name:    "subject id that is not a purl",
			d:       ceBinary([]byte(`{"subject":{"id":"registry.example.com/shop/api:1"}}`), "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.3.0"),
			wantErr: errAny,
		},
		{
			name:    "oci purl without repository_url",
			d:       ceBinary([]byte(`{"subject":{"id":"pkg:oci/api@sha256%3Aab?tag=1"}}`), "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.3.0"),
			wantErr: errAny,
		},
		{
			name: "a bad consumed event fails the batch",
			d: ceStructured([]byte(`[{"specversion":"1.0","id":"1","source":"/s","type":"a"},
				{"specversion":"1.0","id":"2","source":"/s","type":"dev.flotilla.image.pushed.v1","data":{"registry":1}}]`), "application/cloudevents-batch+json"),
			wantErr: errAny,
		},
		{name: "invalid event", d: ceBinary([]byte(`{}`), "Specversion", "1.0", "Source", "/s", "Type", "dev.flotilla.image.pushed.v1"), wantErr: errAny},
		{name: "empty batch", d: ceStructured([]byte(`[]`), "application/cloudevents-batch+json"), wantErr: errAny},
		{name: "not a CloudEvent", d: ceStructured([]byte(`{"ref":"x"}`), "application/json"), wantErr: ErrUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := CloudEventsSender{}.Parse(tt.d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			if len(res.Events) != len(tt.want) {
				t.Fatalf("%d events, want %d: %v", len(res.Events), len(tt.want), res.Events)
			}
			for i, w := range tt.want {
				e := res.Events[i]
				var got any
				switch w.payload.(type) {
				case events.ImagePushed:
					got = payloads[events.ImagePushed](t, res.Events[i:i+1])[0]
				case events.GitPushed:
					got = payloads[events.GitPushed](t, res.Events[i:i+1])[0]
				}
				if diff := cmp.Diff(w.payload, got); diff != "" {
					t.Errorf("event %d payload (-want +got):\n%s", i, diff)
				}
				if e.ID() != w.id || e.Source() != "/hooks/ce" || e.Subject() != w.subject || !e.Time().Equal(w.at) || events.RolloutID(e) != w.rollout {
					t.Errorf("event %d: id %q source %q subject %q time %v rollout %q; want id %q subject %q time %v rollout %q",
						i, e.ID(), e.Source(), e.Subject(), e.Time(), events.RolloutID(e), w.id, w.subject, w.at, w.rollout)
				}
			}
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			if res.DeliveryID != tt.wantDelivery {
				t.Errorf("DeliveryID = %q, want %q", res.DeliveryID, tt.wantDelivery)
			}
		})
	}
}

func TestCloudEventsReplay(t *testing.T) {
	body := fixture(t, "cloudevents", "batch.json")
	first, err := CloudEventsSender{}.Parse(ceStructured(body, "application/cloudevents-batch+json"))
	if err != nil {
		t.Fatal(err)
	}
	again := ceStructured(body, "application/cloudevents-batch+json")
	again.ReceivedAt = received.Add(time.Hour)
	second, err := CloudEventsSender{}.Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Events) != 2 || len(second.Events) != 2 {
		t.Fatalf("events: %d, %d", len(first.Events), len(second.Events))
	}
	for i := range first.Events {
		if first.Events[i].ID() != second.Events[i].ID() || string(first.Events[i].Data()) != string(second.Events[i].Data()) {
			t.Errorf("event %d differs on redelivery: %v vs %v", i, first.Events[i], second.Events[i])
		}
	}

	// The same id from another source is another event.
	cde := fixture(t, "cloudevents", "cdevents_artifact_published.json")
	a, errA := CloudEventsSender{}.Parse(cdeventBinary(cde, "1", "/a", "dev.cdevents.artifact.published.0.3.0", "", ""))
	b, errB := CloudEventsSender{}.Parse(cdeventBinary(cde, "1", "/b", "dev.cdevents.artifact.published.0.3.0", "", ""))
	if errA != nil || errB != nil || a.Events[0].ID() == b.Events[0].ID() {
		t.Errorf("same id, other source: %v %v, ids %v %v", errA, errB, a.Events, b.Events)
	}
}

func TestParsePurl(t *testing.T) {
	tests := []struct {
		purl    string
		want    events.ImagePushed
		wantErr error // nil, errPurlNotImage or errAny
	}{
		{
			purl: "pkg:oci/api@sha256%3Aab12?repository_url=registry.example.com/shop&tag=1.4.2",
			want: events.ImagePushed{Registry: "registry.example.com", Repository: "shop/api", Tag: "1.4.2", Digest: "sha256:ab12"},
		},
		{
			// The purl spec's own example: repository_url names the repository.
			purl: "pkg:oci/debian@sha256%3A244fd47e07d10?repository_url=docker.io/library/debian&arch=amd64&tag=latest",
			want: events.ImagePushed{Registry: "docker.io", Repository: "library/debian", Tag: "latest", Digest: "sha256:244fd47e07d10"},
		},
		{
			purl: "pkg:oci/static@sha256%3A244fd47e07d10?repository_url=https%3A%2F%2Fgcr.io%2Fdistroless%2Fstatic&tag=nonroot#sub/path",
			want: events.ImagePushed{Registry: "gcr.io", Repository: "distroless/static", Tag: "nonroot", Digest: "sha256:244fd47e07d10"},
		},
		{
			// Harbor's CDEvents: an unescaped digest, a repository_url with tag and digest.
			purl: "pkg:oci/busybox@sha256:dde8e930c7b6?repository_url=harbor.dev%2Flibrary%2Fbusybox:v1.0@sha256:dde8e930c7b6&tag=v1.0",
			want: events.ImagePushed{Registry: "harbor.dev", Repository: "library/busybox", Tag: "v1.0", Digest: "sha256:dde8e930c7b6"},
		},
		{
			purl: "PKG:OCI/api?Repository_URL=localhost:5000&TAG=dev",
			want: events.ImagePushed{Registry: "localhost:5000", Repository: "api", Tag: "dev"},
		},
		{
			purl: "pkg:docker/cassandra@latest",
			want: events.ImagePushed{Registry: "docker.io", Repository: "library/cassandra", Tag: "latest"},
		},
		{
			purl: "pkg:docker/customer/dockerimage@sha256%3A244fd47e07d10?repository_url=gcr.io&tag=v2",
			want: events.ImagePushed{Registry: "gcr.io", Repository: "customer/dockerimage", Tag: "v2", Digest: "sha256:244fd47e07d10"},
		},
		{purl: "pkg:npm/%40angular/animation@12.3.1", wantErr: errPurlNotImage},
		{purl: "pkg:oci/api@sha256%3Aab?tag=1", wantErr: errAny},
		{purl: "pkg:oci/api?repository_url=/shop&tag=1", wantErr: errAny},
		{purl: "pkg:oci/api%zz?repository_url=r/s", wantErr: errAny},
		{purl: "pkg:oci/api@%zz?repository_url=r/s", wantErr: errAny},
		{purl: "pkg:oci/api?repository_url=%zz", wantErr: errAny},
		{purl: "pkg:oci", wantErr: errAny},
		{purl: "pkg:/", wantErr: errAny},
		{purl: "oci/api", wantErr: errAny},
		{purl: "", wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.purl, func(t *testing.T) {
			p, err := parsePurl(tt.purl)
			var got events.ImagePushed
			if err == nil {
				got, err = p.image()
			}
			switch {
			case tt.wantErr == nil:
				if err != nil {
					t.Fatalf("error %v", err)
				}
			case errors.Is(tt.wantErr, errPurlNotImage):
				if !errors.Is(err, errPurlNotImage) {
					t.Fatalf("error %v, want %v", err, errPurlNotImage)
				}
				return
			default:
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCloudEventsAuthenticate(t *testing.T) {
	const secret = "ce-token-9f2"
	body := fixture(t, "cloudevents", "image_pushed.json")
	tests := []struct {
		name   string
		s      CloudEventsSender
		header string
		value  string // "" leaves the header out
		wantOK bool
	}{
		{"bearer", CloudEventsSender{Secret: secret}, "Authorization", "Bearer " + secret, true},
		{"verbatim", CloudEventsSender{Secret: secret}, "Authorization", secret, true},
		{"basic", CloudEventsSender{Secret: "user:" + secret}, "Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+secret)), true},
		{"custom header", CloudEventsSender{Secret: secret, Header: "x-flotilla-token"}, "X-Flotilla-Token", secret, true},
		{"custom header, secret in Authorization", CloudEventsSender{Secret: secret, Header: "X-Flotilla-Token"}, "Authorization", "Bearer " + secret, false},
		{"wrong token", CloudEventsSender{Secret: secret}, "Authorization", "Bearer guess", false},
		{"token prefix", CloudEventsSender{Secret: secret}, "Authorization", "Bearer " + secret[:5], false},
		{"missing header", CloudEventsSender{Secret: secret}, "Authorization", "", false},
		{"empty secret never matches", CloudEventsSender{}, "Authorization", "Bearer ", false},
		{"empty secret, some token", CloudEventsSender{}, "Authorization", "Bearer " + secret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ceStructured(body, "application/cloudevents+json")
			if tt.value != "" {
				d.Header.Set(tt.header, tt.value)
			}
			checkAuth(t, tt.s, d, tt.wantOK)
		})
	}
}

func TestNewCloudEventsSender(t *testing.T) {
	s, err := newCloudEventsSender(ReceiverConfig{Name: "ce", Type: SenderCloudEvents, Secret: "x", Header: "X-Token"})
	if err != nil || s != (CloudEventsSender{Secret: "x", Header: "X-Token"}) {
		t.Errorf("newCloudEventsSender = %v, %v", s, err)
	}
	if _, err := newCloudEventsSender(ReceiverConfig{Name: "ce", Type: SenderCloudEvents, Secret: "x", Header: "X Token:"}); err == nil {
		t.Error("a header name with a space and a colon was accepted")
	}
	if s, err := newTektonSender(ReceiverConfig{Name: "t", Type: SenderTekton, Secret: "x"}); err != nil || s != (TektonSender{Secret: "x"}) {
		t.Errorf("newTektonSender = %v, %v", s, err)
	}
}

func FuzzCloudEventsParse(f *testing.F) {
	seedFixtures(f, "cloudevents")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []*Delivery{
			ceStructured(body, "application/cloudevents+json"),
			ceStructured(body, "application/cloudevents-batch+json"),
			ceBinary(body, "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.cdevents.artifact.published.0.3.0"),
			ceBinary(body, "Specversion", "1.0", "Id", "1", "Source", "/s", "Type", "dev.flotilla.image.pushed.v1"),
		} {
			res, err := CloudEventsSender{}.Parse(d)
			checkFuzzResult(t, res, err)
		}
		// Purls alone, whatever the bytes.
		if p, err := parsePurl(string(body)); err == nil {
			_, _ = p.image()
		}
	})
}

// A header named "Ce-" made cloudevents/sdk-go v2.16.2 panic (index out of
// range in Message.ReadBinary): found by make fuzz-live. It is refused.
func TestEmptyCloudEventsAttributeHeader(t *testing.T) {
	for _, s := range []Sender{CloudEventsSender{}, TektonSender{}} {
		d := ceBinary([]byte(`{"registry":"r.example.com","repository":"a/b","tag":"1"}`),
			"Specversion", "1.0", "Id", "1", "Source", "/x", "Type", events.TypeImagePushed)
		d.Header["Ce-"] = []string{"x"}
		_, err := s.Parse(d)
		if err == nil || !fault.IsPermanent(err) || !strings.Contains(err.Error(), "names no CloudEvents attribute") {
			t.Errorf("%T.Parse with a Ce- header = %v, want a permanent refusal", s, err)
		}
	}
}
