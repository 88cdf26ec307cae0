package intake

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func ecrDelivery(body []byte) *Delivery {
	return &Delivery{
		Receiver:   "ecr",
		Header:     header("Content-Type", "application/json; charset=utf-8", "User-Agent", "Amazon/EventBridge/ApiDestinations"),
		Body:       body,
		ReceivedAt: received,
	}
}

// ecrEventJSON is an ECR image action with detail replaced.
func ecrEventJSON(account, region, detail string) string {
	return `{"version":"0","id":"e1","detail-type":"ECR Image Action","source":"aws.ecr","account":"` + account +
		`","time":"2026-01-02T15:00:00Z","region":"` + region + `","resources":[],"detail":` + detail + `}`
}

func TestECRParse(t *testing.T) {
	const pushID = "13cde686-328b-6117-af20-0e5566167482"
	const pushDetail = `{"result":"SUCCESS","repository-name":"shop/api","action-type":"PUSH","image-tag":"t"}`
	const noID = `{"detail-type":"ECR Image Action","source":"aws.ecr","account":"123456789012","region":"eu-west-1","detail":` + pushDetail + `}`
	tests := []imageParseCase{
		{
			name: "push",
			file: "push.json",
			want: []events.ImagePushed{{
				Registry:   "123456789012.dkr.ecr.us-west-2.amazonaws.com",
				Repository: "shop/api",
				Tag:        "1.4.2",
				Digest:     "sha256:7f5b2640fe6fb4f46592dfd3410c4a79dac4f89e4782432e0378abcd12345678",
				Sender:     "ecr",
				Receiver:   "ecr",
				DeliveryID: pushID,
			}},
			wantIDs:   []string{"ecr/ecr/" + pushID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
			wantDeliv: pushID,
		},
		{
			name: "China region, manifest media type",
			file: "push_china.json",
			want: []events.ImagePushed{{
				Registry:   "210987654321.dkr.ecr.cn-north-1.amazonaws.com.cn",
				Repository: "web",
				Tag:        "v2.0.0",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				MediaType:  "application/vnd.oci.image.index.v1+json",
				Sender:     "ecr",
				Receiver:   "ecr",
				DeliveryID: "8a2f6c1d-0b3e-4d5f-9a7b-2c4e6f8a0b1c",
			}},
			wantIDs:   []string{"ecr/ecr/8a2f6c1d-0b3e-4d5f-9a7b-2c4e6f8a0b1c"},
			wantTimes: []time.Time{time.Date(2026, 1, 3, 9, 30, 2, 0, time.UTC)},
			wantDeliv: "8a2f6c1d-0b3e-4d5f-9a7b-2c4e6f8a0b1c",
		},
		{name: "failed push", file: "push_failed.json", wantIgnored: "failed push", wantDeliv: "c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f"},
		{name: "delete", file: "delete.json", wantIgnored: "delete", wantDeliv: "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b"},
		{name: "untagged push", file: "push_untagged.json", wantIgnored: "untagged push", wantDeliv: "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"},
		{name: "image scan", file: "scan.json", wantIgnored: "ECR Image Scan", wantDeliv: "85fc3613-e913-7fc4-a80c-a3753e4aa9ae"},
		{
			name:        "another service",
			body:        []byte(`{"id":"e9","detail-type":"Object Created","source":"aws.s3","account":"123456789012","region":"us-east-1","detail":{}}`),
			wantIgnored: "source aws.s3",
			wantDeliv:   "e9",
		},
		{name: "no action-type", body: []byte(ecrEventJSON("123456789012", "us-east-1", `{"result":"SUCCESS","repository-name":"a","image-tag":"t"}`)), wantIgnored: "no action-type", wantDeliv: "e1"},
		{name: "no result", body: []byte(ecrEventJSON("123456789012", "us-east-1", `{"repository-name":"a","action-type":"PUSH","image-tag":"t"}`)), wantIgnored: "failed push", wantDeliv: "e1"},
		{
			name:      "lower-case values, no digest",
			body:      []byte(ecrEventJSON("123456789012", "eu-central-1", `{"result":"success","repository-name":"a","action-type":"push","image-tag":"t","unknown":[1,2.5]}`)),
			want:      []events.ImagePushed{{Registry: "123456789012.dkr.ecr.eu-central-1.amazonaws.com", Repository: "a", Tag: "t", Sender: "ecr", Receiver: "ecr", DeliveryID: "e1"}},
			wantIDs:   []string{"ecr/ecr/e1"},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)},
			wantDeliv: "e1",
		},
		{
			name:      "no id, no time",
			body:      []byte(noID),
			want:      []events.ImagePushed{{Registry: "123456789012.dkr.ecr.eu-west-1.amazonaws.com", Repository: "shop/api", Tag: "t", Sender: "ecr", Receiver: "ecr"}},
			wantIDs:   []string{"ecr/ecr/" + bodyKey(&Delivery{Body: []byte(noID)})},
			wantTimes: []time.Time{received},
		},
		{name: "push without account", body: []byte(ecrEventJSON("", "us-east-1", pushDetail)), wantErr: errAny},
		{name: "push without region", body: []byte(ecrEventJSON("123456789012", "", pushDetail)), wantErr: errAny},
		{name: "account that is not a number", body: []byte(ecrEventJSON("evil.example.com/x", "us-east-1", pushDetail)), wantErr: errAny},
		{name: "region that is not a region", body: []byte(ecrEventJSON("123456789012", "us-east-1.evil.com/", pushDetail)), wantErr: errAny},
		{name: "push without repository", body: []byte(ecrEventJSON("123456789012", "us-east-1", `{"result":"SUCCESS","action-type":"PUSH","image-tag":"t"}`)), wantErr: errAny},
		{name: "not an EventBridge event", body: []byte(`{"repository":"a","tag":"t"}`), wantErr: errAny},
		{name: "input-transformed event without source", body: []byte(`{"detail-type":"ECR Image Action","detail":{}}`), wantErr: errAny},
		{name: "array of events", body: []byte(`[` + noID + `]`), wantErr: errAny},
		{name: "detail not an object", body: []byte(ecrEventJSON("123456789012", "us-east-1", `"push"`)), wantErr: errAny},
		{name: "not JSON", body: []byte(`detail-type=ECR`), wantErr: errAny},
		{name: "truncated", body: []byte(noID[:len(noID)-10]), wantErr: errAny},
		{name: "wrong content type", file: "push.json", contentType: "text/plain", wantErr: ErrUnsupportedMediaType},
	}
	runImageParseCases(t, "ecr", ECRSender{}.Parse, ecrDelivery, tests)
}

func TestECRRedeliveryDedupes(t *testing.T) {
	body := fixture(t, "ecr", "push.json")
	parse := func(body []byte) string {
		t.Helper()
		res, err := ECRSender{}.Parse(ecrDelivery(body))
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse: %v, %d events", err, len(res.Events))
		}
		return res.Events[0].ID()
	}
	if a, b := parse(body), parse(body); a != b {
		t.Errorf("same delivery, different ids %q %q", a, b)
	}
	// EventBridge retries an API destination with the same event id.
	retried := []byte(strings.Replace(string(body), `"resources": []`, `"resources": [], "retry": 1`, 1))
	if a, b := parse(body), parse(retried); a != b {
		t.Errorf("retried event, different ids %q %q", a, b)
	}
}

func TestECRAuthenticate(t *testing.T) {
	const secret = "ecr-api-key-s3cret"
	basic := func(cred string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred)) }
	tests := []struct {
		name       string
		header     []string
		confHeader string
		secret     string
		wantOK     bool
	}{
		{name: "OAuth bearer token", header: []string{"Authorization", "Bearer " + secret}, secret: secret, wantOK: true},
		{name: "Basic connection", header: []string{"Authorization", basic("eventbridge:" + secret)}, secret: "eventbridge:" + secret, wantOK: true},
		{name: "API key in Authorization", header: []string{"Authorization", secret}, secret: secret, wantOK: true},
		{name: "API key in its own header", header: []string{"X-Api-Key", secret}, confHeader: "x-api-key", secret: secret, wantOK: true},
		{name: "API key in another header than configured", header: []string{"X-Api-Key", secret}, secret: secret},
		{name: "Authorization when another header is configured", header: []string{"Authorization", "Bearer " + secret}, confHeader: "X-Api-Key", secret: secret},
		{name: "wrong API key", header: []string{"X-Api-Key", "guess"}, confHeader: "X-Api-Key", secret: secret},
		{name: "wrong Basic password", header: []string{"Authorization", basic("eventbridge:guess")}, secret: "eventbridge:" + secret},
		{name: "secret as prefix", header: []string{"Authorization", "Bearer " + secret + "0"}, secret: secret},
		{name: "truncated", header: []string{"Authorization", "Bearer " + secret[:3]}, secret: secret},
		{name: "missing header", secret: secret},
		{name: "empty secret never matches", header: []string{"Authorization", "Bearer "}, secret: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ecrDelivery(fixture(t, "ecr", "push.json"))
			for i := 0; i+1 < len(tt.header); i += 2 {
				d.Header.Set(tt.header[i], tt.header[i+1])
			}
			checkAuth(t, ECRSender{Secret: tt.secret, Header: tt.confHeader}, d, tt.wantOK)
		})
	}
	if usesPathToken(ECRSender{}) {
		t.Error("ECRSender takes path tokens")
	}
}

func TestNewECRSender(t *testing.T) {
	s, err := newECRSender(ReceiverConfig{Name: "ecr", Type: SenderECR, Secret: "s", Header: "X-Api-Key"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ECRSender{Secret: "s", Header: "X-Api-Key"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
}

func FuzzECR(f *testing.F) {
	seedFixtures(f, "ecr")
	f.Add([]byte(ecrEventJSON("1", "cn-", `{"result":"SUCCESS","repository-name":"a","action-type":"PUSH","image-tag":"t"}`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := ECRSender{}.Parse(ecrDelivery(body))
		checkFuzzResult(t, res, err)
	})
}
