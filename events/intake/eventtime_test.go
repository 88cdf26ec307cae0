package intake

import (
	"regexp"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// withTime replaces the value of every "field" in a JSON body by value (raw
// JSON).
func withTime(t *testing.T, body []byte, field, value string) []byte {
	t.Helper()
	re := regexp.MustCompile(`("` + field + `"\s*:\s*)("[^"]*"|-?[0-9.eE+]+)`)
	if !re.Match(body) {
		t.Fatalf("no %q in the fixture", field)
	}
	return re.ReplaceAll(body, []byte("${1}"+value))
}

// An event time outside years 1-9999 (in UTC) was journaled as the SDK
// wrote it ("287396-10-12T08:59:00.993Z"), could not be read back, and
// stopped the engine on every restart. Every sender now stamps such an
// event with the time it was received, and every event reads back.
func TestOutOfRangeSenderTimes(t *testing.T) {
	// Times that, in UTC, fall before year 1 or after year 9999.
	rfc3339 := []string{`"0000-01-01T00:00:00+01:00"`, `"9999-12-31T23:59:59-01:00"`, `"0001-01-01T00:00:00+00:01"`}
	unixMillis := []string{`9007199254740993`, `"9007199254740993"`, `-62135596800001`, `"-62135596800001"`}
	unixSeconds := []string{`9007199254740993`, `-62135596801`, `1e300`, `2.6e11`}
	ce := tektonCE{tektonIDPrefix + "1", "dev.tekton.event.pipelinerun.started.v1", "run-1", 0}
	tests := []struct {
		name   string
		sender string
		field  string
		values []string
		// d builds the delivery of the fixture with the time replaced.
		d func(t *testing.T, v string) *Delivery
	}{
		{"distribution timestamp", SenderDistribution, "timestamp", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return distributionDelivery(withTime(t, fixture(t, "distribution", "batch.json"), "timestamp", v), distributionEventsV2)
		}},
		{"nexus timestamp", SenderNexus, "timestamp", append([]string{`"0000-01-01T00:00:00.000+0100"`}, unixMillis...), func(t *testing.T, v string) *Delivery {
			t.Helper()
			return nexusDelivery("rm:repository:component", withTime(t, fixture(t, "nexus", "docker_created.json"), "timestamp", v))
		}},
		{"flagger metadata.timestamp", SenderFlagger, "timestamp", unixMillis[1:2], func(t *testing.T, v string) *Delivery {
			t.Helper()
			return flaggerDelivery(withTime(t, fixture(t, "flagger", "promoted.json"), "timestamp", v), nil, "")
		}},
		{"cloudevents time", SenderCloudEvents, "time", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return ceStructured(withTime(t, fixture(t, "cloudevents", "image_pushed.json"), "time", v), "application/cloudevents+json")
		}},
		{"cdevents context.timestamp", SenderCloudEvents, "timestamp", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return ceStructured(withTime(t, fixture(t, "cloudevents", "cdevents_artifact_published.json"), "timestamp", v), "application/cloudevents+json")
		}},
		{"acr timestamp", SenderACR, "timestamp", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return acrDelivery(withTime(t, fixture(t, "acr", "push.json"), "timestamp", v))
		}},
		{"ecr time", SenderECR, "time", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return ecrDelivery(withTime(t, fixture(t, "ecr", "push.json"), "time", v))
		}},
		{"gar publishTime", SenderGAR, "publishTime", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return garDelivery(withTime(t, fixture(t, "gar", "insert_tag.json"), "publish_?[tT]ime", v))
		}},
		{"ghcr updated_at", SenderGitHub, "updated_at", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return githubDelivery("package", withTime(t, fixture(t, "ghcr", "package_published.json"), "updated_at", v), "application/json")
		}},
		{"harbor occur_at", SenderHarbor, "occur_at", unixSeconds, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return harborDelivery(withTime(t, fixture(t, "harbor", "push.json"), "occur_at", v), "application/json")
		}},
		{"harbor cloudevents time", SenderHarbor, "time", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return harborDelivery(withTime(t, fixture(t, "harbor", "cloudevents_push.json"), "time", v), "application/cloudevents+json")
		}},
		{"dockerhub pushed_at", SenderDockerHub, "pushed_at", unixSeconds, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return dockerHubDelivery(withTime(t, fixture(t, "dockerhub", "push.json"), "pushed_at", v), "")
		}},
		{"bitbucket server date", SenderBitbucketServer, "date", rfc3339, func(t *testing.T, v string) *Delivery {
			t.Helper()
			return bitbucketServerDelivery("repo:refs_changed", withTime(t, fixture(t, "bitbucket-server", "refs_changed.json"), "date", v))
		}},
		{"tekton ce-time", SenderTekton, "", []string{"0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"}, func(t *testing.T, v string) *Delivery {
			t.Helper()
			d := tektonDelivery(ce, fixture(t, "tekton", "pipelinerun_started.json"), "cluster=eu-1")
			d.Header.Set("Ce-Time", v)
			return d
		}},
	}
	for _, tt := range tests {
		for _, v := range tt.values {
			t.Run(tt.name+"="+v, func(t *testing.T) {
				s, err := NewSender(ReceiverConfig{Name: "r", Type: tt.sender, Insecure: true, Registry: "nexus.example.com:8082"})
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.Parse(tt.d(t, v))
				if err != nil {
					// Refusing is fine too; journaling what cannot be read back is not.
					if !fault.IsPermanent(err) {
						t.Fatalf("Parse: %v (not permanent)", err)
					}
					return
				}
				if len(res.Events) == 0 {
					t.Fatalf("Parse: no events (ignored: %q)", res.Ignored)
				}
				for _, e := range res.Events {
					checkReadsBack(t, e)
					if got := e.Time(); !got.Equal(received) {
						t.Errorf("event %s: time %v, want the received time %v", e.ID(), got, received)
					}
				}
			})
		}
	}
}

func TestValidTime(t *testing.T) {
	tests := []struct {
		t    time.Time
		want bool
	}{
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), true},
		{time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("+01", 3600)), false},
		{time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("-01", -3600)), false},
		{time.UnixMilli(9007199254740993), false},
		{received, true},
	}
	for _, tt := range tests {
		if got := ValidTime(tt.t); got != tt.want {
			t.Errorf("ValidTime(%v) = %v, want %v", tt.t, got, tt.want)
		}
	}
}
