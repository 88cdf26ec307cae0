package intake

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func dockerHubDelivery(body []byte, token string) *Delivery {
	return &Delivery{
		Receiver:   "hub",
		Header:     header("Content-Type", "application/json", "User-Agent", "python-requests/2.31.0"),
		Body:       body,
		PathToken:  token,
		ReceivedAt: received,
	}
}

func TestDockerHubParse(t *testing.T) {
	push := fixture(t, "dockerhub", "push.json")
	hubID := func(body []byte) []string {
		return []string{"hub/dockerhub/" + bodyKey(&Delivery{Body: body})}
	}
	pushed := func(repo, tag, pusher string) []events.ImagePushed {
		return []events.ImagePushed{{Registry: "docker.io", Repository: repo, Tag: tag, Pusher: pusher, Sender: "dockerhub", Receiver: "hub"}}
	}
	inline := func(pushData string) []byte {
		return []byte(`{"push_data":` + pushData + `,"repository":{"repo_name":"acme/api","namespace":"acme","name":"api"}}`)
	}
	tests := []struct {
		name        string
		body        []byte
		contentType string // "-" leaves it out
		want        []events.ImagePushed
		wantTime    time.Time
		wantErr     error
	}{
		{name: "push", body: push, want: pushed("acme/api", "1.4.2", "ci-bot"), wantTime: time.Unix(1767366270, 0).UTC()},
		{name: "push, charset in content type", body: push, contentType: "application/json; charset=utf-8", want: pushed("acme/api", "1.4.2", "ci-bot"), wantTime: time.Unix(1767366270, 0).UTC()},
		{name: "push without content type", body: push, contentType: "-", want: pushed("acme/api", "1.4.2", "ci-bot"), wantTime: time.Unix(1767366270, 0).UTC()},
		{
			name:     "legacy payload: float pushed_at, image list",
			body:     fixture(t, "dockerhub", "push_legacy_float.json"),
			want:     pushed("svendowideit/testhook", "latest", "trustedbuilder"),
			wantTime: time.Unix(1417566161, 0).UTC(),
		},
		{
			name:     "official image is under library/",
			body:     fixture(t, "dockerhub", "official.json"),
			want:     pushed("library/nginx", "1.27-alpine", "doijanky"),
			wantTime: time.Unix(1767366300, 0).UTC(),
		},
		{
			name:     "pushed_at as a string with a fraction",
			body:     inline(`{"tag":"t","pushed_at":"1767366270.5"}`),
			want:     pushed("acme/api", "t", ""),
			wantTime: time.Unix(1767366270, 500_000_000).UTC(),
		},
		{name: "no pushed_at: time of receipt", body: inline(`{"tag":"t"}`), want: pushed("acme/api", "t", ""), wantTime: received},
		{name: "pushed_at not a number", body: inline(`{"tag":"t","pushed_at":{"s":1}}`), want: pushed("acme/api", "t", ""), wantTime: received},
		{name: "pushed_at negative", body: inline(`{"tag":"t","pushed_at":-5}`), want: pushed("acme/api", "t", ""), wantTime: received},
		{name: "pushed_at beyond year 9999", body: inline(`{"tag":"t","pushed_at":1e300}`), want: pushed("acme/api", "t", ""), wantTime: received},
		{
			name:     "no repo_name: namespace and name",
			body:     []byte(`{"push_data":{"tag":"t"},"repository":{"namespace":"acme","name":"web"}}`),
			want:     pushed("acme/web", "t", ""),
			wantTime: received,
		},
		{name: "no tag", body: fixture(t, "dockerhub", "no_tag.json"), wantErr: errAny},
		{name: "empty tag", body: inline(`{"tag":""}`), wantErr: errAny},
		{name: "no repository", body: []byte(`{"push_data":{"tag":"t"}}`), wantErr: errAny},
		{name: "tag not a string", body: inline(`{"tag":1}`), wantErr: errAny},
		{name: "not JSON", body: []byte(`tag=latest`), wantErr: errAny},
		{name: "JSON array", body: []byte(`[{"push_data":{"tag":"t"}}]`), wantErr: errAny},
		{name: "truncated", body: push[:len(push)/2], wantErr: errAny},
		{name: "form content type", body: push, contentType: "application/x-www-form-urlencoded", wantErr: ErrUnsupportedMediaType},
		{name: "unparsable content type", body: push, contentType: "application/json; =x", wantErr: ErrUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dockerHubDelivery(tt.body, "")
			switch tt.contentType {
			case "":
			case "-":
				d.Header.Del("Content-Type")
			default:
				d.Header.Set("Content-Type", tt.contentType)
			}
			res, err := DockerHubSender{}.Parse(d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			checkImageEvents(t, res, "hub", tt.want, hubID(tt.body), []time.Time{tt.wantTime})
			if res.Ignored != "" || res.DeliveryID != "" {
				t.Errorf("Ignored %q, DeliveryID %q", res.Ignored, res.DeliveryID)
			}
			for _, e := range res.Events {
				if got, want := e.Subject(), "docker.io/"+tt.want[0].Repository+":"+tt.want[0].Tag; got != want {
					t.Errorf("subject %q, want %q", got, want)
				}
			}
		})
	}
}

func TestDockerHubRedeliveryDedupes(t *testing.T) {
	parse := func(body []byte) string {
		t.Helper()
		res, err := DockerHubSender{}.Parse(dockerHubDelivery(body, ""))
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse: %v, %d events", err, len(res.Events))
		}
		return res.Events[0].ID()
	}
	push := fixture(t, "dockerhub", "push.json")
	if a, b := parse(push), parse(append([]byte(nil), push...)); a != b {
		t.Errorf("same delivery, different ids %q %q", a, b)
	}
	other := []byte(`{"push_data":{"tag":"1.4.3","pusher":"ci-bot","pushed_at":1767366270},"repository":{"repo_name":"acme/api"}}`)
	if a, b := parse(push), parse(other); a == b {
		t.Errorf("two pushes, same id %q", a)
	}
}

func TestDockerHubAuthenticate(t *testing.T) {
	const secret = "hub-9f8e7d6c5b4a"
	push := fixture(t, "dockerhub", "push.json")
	tests := []struct {
		name   string
		token  string
		secret string
		header []string
		wantOK bool
	}{
		{name: "right path token", token: secret, secret: secret, wantOK: true},
		{name: "wrong path token", token: "hub-0000000000", secret: secret},
		{name: "secret as prefix", token: secret + "x", secret: secret},
		{name: "truncated token", token: secret[:len(secret)-1], secret: secret},
		{name: "no path token", secret: secret},
		{name: "a header token is not a path token", header: []string{"Authorization", "Bearer " + secret}, secret: secret},
		{name: "empty secret never matches", token: "", secret: ""},
		{name: "empty secret, some token", token: "x", secret: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dockerHubDelivery(push, tt.token)
			for i := 0; i+1 < len(tt.header); i += 2 {
				d.Header.Set(tt.header[i], tt.header[i+1])
			}
			checkAuth(t, DockerHubSender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
	if !usesPathToken(DockerHubSender{}) {
		t.Error("DockerHubSender does not take path tokens: the intake would answer 404")
	}
}

func TestNewDockerHubSender(t *testing.T) {
	s, err := newDockerHubSender(ReceiverConfig{Name: "hub", Type: SenderDockerHub, Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DockerHubSender{Secret: "s"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
}

func FuzzDockerHub(f *testing.F) {
	seedFixtures(f, "dockerhub")
	f.Add([]byte(`{"push_data":{"tag":"t","pushed_at":"NaN"},"repository":{"repo_name":"/"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := DockerHubSender{}.Parse(dockerHubDelivery(body, ""))
		checkFuzzResult(t, res, err)
	})
}
