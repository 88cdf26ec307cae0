package intake

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"
)

func distributionDelivery(body []byte, contentType string) *Delivery {
	return &Delivery{
		Receiver:   "registry",
		Header:     header("Content-Type", contentType),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestDistributionParse(t *testing.T) {
	const v1, v2 = distributionEventsV1, distributionEventsV2
	tests := []imageParseCase{
		{
			name:        "batch keeps the tagged manifest push",
			body:        fixture(t, "distribution", "batch.json"),
			contentType: v2,
			want: []events.ImagePushed{{
				Registry:   "registry.example.com",
				Repository: "shop/api",
				Tag:        "1.4.2",
				Digest:     "sha256:fea8895f450959fa676bcc1df0611ea93823a735a01205fd8622846041d0c7cf",
				MediaType:  "application/vnd.oci.image.manifest.v1+json",
				Pusher:     "ci",
				Sender:     "distribution",
				Receiver:   "registry",
				DeliveryID: "a1b2-0",
			}},
			wantIDs:   []string{"registry/distribution/a1b2-0"},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		},
		{
			name:        "v1 envelope, index and manifest list, host from target.url",
			body:        fixture(t, "distribution", "multiarch.json"),
			contentType: v1,
			want: []events.ImagePushed{{
				Registry:   "registry.example.com:5000",
				Repository: "team/app",
				Tag:        "v2.0.0",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				MediaType:  "application/vnd.oci.image.index.v1+json",
				Pusher:     "buildbot",
				Sender:     "distribution",
				Receiver:   "registry",
				DeliveryID: "f0e1d2c3-0024-4a5b-8c6d-7e8f9a0b1c2d",
			}, {
				Registry:   "registry.example.com:5000",
				Repository: "team/app",
				Tag:        "v2.0.0-docker",
				Digest:     "sha256:6666666666666666666666666666666666666666666666666666666666666666",
				MediaType:  "application/vnd.docker.distribution.manifest.list.v2+json",
				Pusher:     "buildbot",
				Sender:     "distribution",
				Receiver:   "registry",
				DeliveryID: "f0e1d2c3-0026-4a5b-8c6d-7e8f9a0b1c2d",
			}},
			wantIDs: []string{
				"registry/distribution/f0e1d2c3-0024-4a5b-8c6d-7e8f9a0b1c2d",
				"registry/distribution/f0e1d2c3-0026-4a5b-8c6d-7e8f9a0b1c2d",
			},
			wantTimes: []time.Time{
				time.Date(2026, 1, 3, 9, 30, 2, 0, time.UTC),
				time.Date(2026, 1, 3, 9, 30, 3, 0, time.UTC),
			},
		},
		{
			name:        "only blobs and pulls",
			body:        fixture(t, "distribution", "ignored.json"),
			contentType: "application/json; charset=utf-8",
			wantIgnored: "3 events: blob push, pull (2)",
		},
		{
			name:        "empty batch",
			body:        []byte(`{"events":[]}`),
			contentType: v2,
			wantIgnored: "0 events",
		},
		{
			name:        "untagged manifest, no timestamp, no id",
			body:        []byte(`{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"a/b"}}]}`),
			contentType: v2,
			wantIgnored: "1 event: untagged manifest push",
		},
		{
			name:        "tagged push without id or timestamp",
			body:        []byte(`{"events":[{"action":"push","target":{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","repository":"a/b","tag":"t"},"request":{"host":"r:5000"}}]}`),
			contentType: v2,
			want:        []events.ImagePushed{{Registry: "r:5000", Repository: "a/b", Tag: "t", MediaType: "application/vnd.docker.distribution.manifest.v2+json", Sender: "distribution", Receiver: "registry"}},
			wantIDs:     []string{"registry/distribution/sha256-834ed79e61009755c1dca19ea355840402121fb300803e9110f78f94b7cf7479"},
			wantTimes:   []time.Time{received},
		},
		{
			name:        "wrong content type",
			body:        fixture(t, "distribution", "batch.json"),
			contentType: "text/plain",
			wantErr:     ErrUnsupportedMediaType,
		},
		{
			name:        "no content type",
			body:        fixture(t, "distribution", "batch.json"),
			contentType: "",
			wantErr:     ErrUnsupportedMediaType,
		},
		{name: "not JSON", body: []byte(`events`), contentType: v2, wantErr: errAny},
		{name: "no events field", body: []byte(`{}`), contentType: v2, wantErr: errAny},
		{name: "event not an object", body: []byte(`{"events":[1]}`), contentType: v2, wantErr: errAny},
		{
			name:        "tagged push without registry host",
			body:        []byte(`{"events":[{"id":"x","action":"push","target":{"mediaType":"application/vnd.oci.image.index.v1+json","repository":"a/b","tag":"t"}}]}`),
			contentType: v2,
			wantErr:     errAny,
		},
		{
			name:        "tagged push without repository",
			body:        []byte(`{"events":[{"id":"x","action":"push","target":{"mediaType":"application/vnd.oci.image.index.v1+json","tag":"t"},"request":{"host":"r"}}]}`),
			contentType: v2,
			wantErr:     errAny,
		},
	}
	runImageParseCases(t, "distribution", DistributionSender{}.Parse, func(body []byte) *Delivery { return distributionDelivery(body, "") }, tests)
}

func TestDistributionAuthenticate(t *testing.T) {
	const secret = "registry-s3cret"
	tests := []struct {
		name   string
		header []string
		secret string
		wantOK bool
	}{
		{"right secret", []string{"Authorization", "Bearer " + secret}, secret, true},
		{"scheme is case-insensitive", []string{"Authorization", "bearer " + secret}, secret, true},
		{"wrong secret", []string{"Authorization", "Bearer not-it"}, secret, false},
		{"secret as prefix", []string{"Authorization", "Bearer " + secret + "x"}, secret, false},
		{"missing header", nil, secret, false},
		{"basic scheme", []string{"Authorization", "Basic " + secret}, secret, false},
		{"verbatim secret (a header configured without scheme)", []string{"Authorization", secret}, secret, true},
		{"basic credentials", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("ci:"+secret))}, "ci:" + secret, true},
		{"other header", []string{"X-Registry-Token", secret}, secret, false},
		{"empty secret never matches", []string{"Authorization", "Bearer "}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := distributionDelivery(fixture(t, "distribution", "batch.json"), distributionEventsV2)
			for i := 0; i+1 < len(tt.header); i += 2 {
				d.Header.Set(tt.header[i], tt.header[i+1])
			}
			checkAuth(t, DistributionSender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
	t.Run("configured header", func(t *testing.T) {
		d := distributionDelivery(fixture(t, "distribution", "batch.json"), distributionEventsV2)
		d.Header.Set("X-Registry-Token", secret)
		checkAuth(t, DistributionSender{Secret: secret, Header: "x-registry-token"}, d, true)
		checkAuth(t, DistributionSender{Secret: secret}, d, false)
	})
}

func FuzzDistributionParse(f *testing.F) {
	seedFixtures(f, "distribution")
	f.Add([]byte(`{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.index.v1+json","tag":"t","url":"%zz"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := DistributionSender{}.Parse(distributionDelivery(body, distributionEventsV2))
		checkFuzzResult(t, res, err)
	})
}
