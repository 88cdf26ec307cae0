package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const (
	apiImage      = "registry.test/shop/api"
	frontendImage = "registry.test/shop/frontend"
)

// imageSet is a release set of two image members, the api applied first.
func imageSet() (set, api, frontend config.Application) {
	api = config.Application{Name: "shop-api", Image: apiImage, Track: config.TrackMinorVersion, DenyTags: []string{".*-debug"}, MemberOf: "shop"}
	frontend = config.Application{Name: "shop-frontend", Image: frontendImage, Track: config.TrackMinorVersion, MemberOf: "shop"}
	set = config.Application{Name: "shop", OnNewVersion: config.OnNewVersionSupersede,
		Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend"}}}}
	return set, api, frontend
}

func api(tag string) rollout.MemberVersion {
	return rollout.MemberVersion{Application: "shop-api", Image: apiImage, Tag: tag, Digest: "sha256:api" + tag}
}

func frontend(tag string) rollout.MemberVersion {
	return rollout.MemberVersion{Application: "shop-frontend", Image: frontendImage, Tag: tag, Digest: "sha256:fe" + tag}
}

func TestSetVersion(t *testing.T) {
	order := []string{"shop-api", "shop-frontend"}
	v := rollout.SetVersion{frontend("1.0.0")}.With(order, api("1.0.0"))
	if diff := cmp.Diff(rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}, v); diff != "" {
		t.Errorf("With keeps the set's order (-want +got):\n%s", diff)
	}
	if got := v.Tag(); got != "shop-api:1.0.0,shop-frontend:1.0.0" {
		t.Errorf("Tag = %q", got)
	}
	next := v.With(order, api("1.1.0"))
	if diff := cmp.Diff(rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}, next); diff != "" {
		t.Errorf("With replaces the member's version (-want +got):\n%s", diff)
	}
	if v[0].Tag != "1.0.0" {
		t.Errorf("With changed its receiver: %v", v)
	}
	rebuilt := v.With(order, rollout.MemberVersion{Application: "shop-api", Image: apiImage, Tag: "1.0.0", Digest: "sha256:rebuilt"})
	built := v.With(order, rollout.MemberVersion{Application: "shop-api", Image: apiImage, Tag: "1.0.0", Digest: "sha256:api1.0.0", Created: t0})
	digests := map[string]string{"v": v.Digest(), "next": next.Digest(), "rebuilt": rebuilt.Digest()}
	if len(map[string]bool{digests["v"]: true, digests["next"]: true, digests["rebuilt"]: true}) != 3 {
		t.Errorf("a member's new tag or digest is a new set digest: %v", digests)
	}
	if built.Digest() != v.Digest() {
		t.Errorf("the build time changed the digest: %s, %s", built.Digest(), v.Digest())
	}
	judged := api("1.0.0")
	judged.SignedBy, judged.Unsigned = "key release", "not trusted"
	if got := v.With(order, judged).Digest(); got != v.Digest() {
		t.Errorf("an entry's signer or verdict changed the digest: %s, %s", got, v.Digest())
	}
	if d := v.Digest(); len(d) != len("sha256:")+64 || d[:7] != "sha256:" {
		t.Errorf("Digest = %q, want sha256:<hex>", d)
	}
	if got := (rollout.SetVersion{}).Digest(); got != "" {
		t.Errorf("no version's digest = %q, want empty", got)
	}
	if m, ok := next.Of("shop-frontend"); !ok || m != frontend("1.0.0") {
		t.Errorf("Of(shop-frontend) = %v, %v", m, ok)
	}
	if _, ok := next.Of("shop-db"); ok {
		t.Error("Of found a member the version has not")
	}
}

// Signature says what an entry's verify found, as describe and the UI
// show it. Catches: an entry unsigned shown as signed (both recorded: the
// verdict wins), and an entry without either shown as unsigned.
func TestMemberVersionSignature(t *testing.T) {
	tests := []struct {
		name               string
		signedBy, unsigned string
		want               string
	}{
		{name: "signed", signedBy: "key release", want: "signed by key release"},
		{name: "unsigned", unsigned: "registry.test/shop/api@sha256:a is not signed", want: "unsigned: registry.test/shop/api@sha256:a is not signed"},
		{name: "both: not trusted", signedBy: "key release", unsigned: "no signature of it is trusted", want: "unsigned: no signature of it is trusted"},
		{name: "neither", want: "no signer recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := api("1.1.0")
			m.SignedBy, m.Unsigned = tt.signedBy, tt.unsigned
			if diff := cmp.Diff(tt.want, m.Signature()); diff != "" {
				t.Errorf("Signature (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideSetPush(t *testing.T) {
	set, apiApp, _ := imageSet()
	deployed := rollout.AppState{DeployedVersions: rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}}
	deployed.DeployedTag, deployed.DeployedDigest = deployed.DeployedVersions.Tag(), deployed.DeployedVersions.Digest()
	inFlight := func(id string, phase rollout.Phase, v ...rollout.MemberVersion) rollout.Rollout {
		return rollout.Rollout{ID: id, Phase: phase, Versions: v, Created: t0}
	}
	push := func(tag string) events.ImageVerified {
		return events.ImageVerified{Image: apiImage, Tag: tag, Digest: "sha256:api" + tag}
	}
	tests := []struct {
		name       string
		st         rollout.AppState
		inFlight   []rollout.Rollout
		v          events.ImageVerified
		want       rollout.SetVersion
		wantReason string
	}{
		{name: "the first push: the other member is left as its clusters run it", v: push("1.0.0"),
			want: rollout.SetVersion{api("1.0.0")}},
		{name: "a new api: the frontend at its deployed version", st: deployed, v: push("1.1.0"),
			want: rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}},
		{name: "an older api: the member's policy says no", st: deployed, v: push("0.9.0"),
			wantReason: "shop-api: 0.9.0 is older than the current 1.0.0"},
		{name: "the member's denyTags", st: deployed, v: push("1.1.0-debug"),
			wantReason: `shop-api: 1.1.0-debug matches the application's denyTags pattern ".*-debug"`},
		{name: "the deployed tag rebuilt is a new version", st: deployed,
			v:    events.ImageVerified{Image: apiImage, Tag: "1.0.0", Digest: "sha256:rebuilt"},
			want: rollout.SetVersion{{Application: "shop-api", Image: apiImage, Tag: "1.0.0", Digest: "sha256:rebuilt"}, frontend("1.0.0")}},
		{name: "a new frontend in flight is taken along", st: deployed, v: push("1.1.0"),
			inFlight: []rollout.Rollout{inFlight("shop-1", rollout.Progressing, api("1.0.0"), frontend("1.1.0"))},
			want:     rollout.SetVersion{api("1.1.0"), frontend("1.1.0")}},
		{name: "a failing rollout's versions are no baseline", st: deployed, v: push("1.1.0"),
			inFlight: []rollout.Rollout{inFlight("shop-1", rollout.Failed, api("1.0.0"), frontend("1.1.0"))},
			want:     rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}},
		{name: "not newer than the api in flight", st: deployed, v: push("1.1.0"),
			inFlight:   []rollout.Rollout{inFlight("shop-1", rollout.Progressing, api("1.2.0"), frontend("1.0.0"))},
			wantReason: "shop-api: 1.1.0 is not newer than 1.2.0, which rollout shop-1 is rolling out"},
		{name: "the api in flight already", st: deployed, v: push("1.1.0"),
			inFlight:   []rollout.Rollout{inFlight("shop-1", rollout.Queued, api("1.1.0"), frontend("1.0.0"))},
			wantReason: "shop-api: 1.1.0 is being rolled out (rollout shop-1)"},
		{name: "a quarantined set version never",
			st: rollout.AppState{DeployedVersions: deployed.DeployedVersions, Quarantined: []rollout.Quarantine{
				{Tag: "shop-api:1.1.0,shop-frontend:1.0.0", By: "alice", Reason: "leaks"}}},
			v: push("1.1.0"), wantReason: "shop-api:1.1.0,shop-frontend:1.0.0 is quarantined (by alice: leaks)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, d, err := rollout.DecideSetPush(set, apiApp, tt.st, tt.inFlight, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if d.Accept != (tt.wantReason == "") || !d.Accept && d.Reason != tt.wantReason {
				t.Errorf("decision = %+v, want reason %q", d, tt.wantReason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("the set's version (-want +got):\n%s", diff)
			}
		})
	}
}

// A member's push plans the set's rollout: its digest and tag are the
// tuple's, its previous version the deployed tuple.
func TestPlanImageSet(t *testing.T) {
	set, apiApp, frontendApp := imageSet()
	cfg := &config.Config{Fleet: config.Fleet{Waves: []config.Wave{{Name: "w1", Clusters: []string{"c1"}}}},
		Applications: []config.Application{apiApp, frontendApp, set}}
	st := rollout.AppState{DeployedVersions: rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}}
	st.DeployedTag, st.DeployedDigest = st.DeployedVersions.Tag(), st.DeployedVersions.Digest()
	ro, skip, err := rollout.Plan(cfg, set, st, nil, events.ImageVerified{Image: frontendImage, Tag: "1.1.0", Digest: "sha256:fe1.1.0"}, "shop-1", nil)
	if err != nil || skip != "" {
		t.Fatalf("Plan = %q, %v", skip, err)
	}
	want := rollout.SetVersion{api("1.0.0"), frontend("1.1.0")}
	got := rollout.Rollout{Application: ro.Application, Image: ro.Image, Tag: ro.Tag, Digest: ro.Digest, PreviousTag: ro.PreviousTag,
		PreviousDigest: ro.PreviousDigest, Versions: ro.Versions, PreviousVersions: ro.PreviousVersions, Members: ro.Members}
	if diff := cmp.Diff(rollout.Rollout{Application: "shop", Image: "shop", Tag: "shop-api:1.0.0,shop-frontend:1.1.0", Digest: want.Digest(),
		PreviousTag: st.DeployedTag, PreviousDigest: st.DeployedDigest, Versions: want, PreviousVersions: st.DeployedVersions,
		Members: []string{"shop-api", "shop-frontend"}}, got); diff != "" {
		t.Errorf("the set's rollout (-want +got):\n%s", diff)
	}
	if _, skip, _ := rollout.Plan(cfg, set, st, nil, events.ImageVerified{Image: "registry.test/other", Tag: "1.1.0"}, "shop-2", nil); skip != "registry.test/other is the image of no member of release set shop" {
		t.Errorf("another image: skip %q", skip)
	}
	st.Deploy(rollout.Rollout{ID: "shop-1", Tag: ro.Tag, Digest: ro.Digest, Versions: ro.Versions, Phase: rollout.Succeeded})
	if diff := cmp.Diff(want, st.DeployedVersions); diff != "" || st.DeployedDigest != want.Digest() {
		t.Errorf("deployed after it succeeded: %s (-want +got):\n%s", st.DeployedDigest, diff)
	}
}

// An image member's own verify judges its pushes: an unsigned entry,
// pushed or taken along from a rollout in flight, holds the set's rollout
// before the first wave requiring a signature (or skips it when that is
// the first wave); its entry signed since goes on to every wave; a member
// without verify takes its own pushes unsigned. Each entry records its
// signer, kept when another member's push takes it along from a rollout
// in flight or from the deployed version. Catches: the set's waves
// requiring no signature (the set has no verify of its own: the api's
// unsigned build rolled out everywhere), the frontend's push carrying the
// api's unsigned entry past wave 1, a deployed tuple held back again, and
// an entry's signer dropped or left to the pushed member alone.
func TestPlanImageSetSignatures(t *testing.T) {
	set, apiApp, frontendApp := imageSet()
	apiApp.Verify = &config.Verify{Signatures: []config.SignatureAuthority{{Name: "release"}}}
	takes := false
	waves := []config.Wave{{Name: "w1", Clusters: []string{"c1"}, RequireSignature: &takes}, {Name: "w2", Clusters: []string{"c2"}}}
	cfg := &config.Config{Fleet: config.Fleet{Waves: waves}, Applications: []config.Application{apiApp, frontendApp, set}}
	strict := &config.Config{Fleet: config.Fleet{Waves: []config.Wave{waves[1], {Name: "w3", Clusters: []string{"c3"}}}},
		Applications: cfg.Applications}
	st := rollout.AppState{DeployedVersions: rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}}
	st.DeployedTag, st.DeployedDigest = st.DeployedVersions.Tag(), st.DeployedVersions.Digest()
	const why = "registry.test/shop/api@sha256:api1.1.0 is not signed"
	unsignedAPI := api("1.1.0")
	unsignedAPI.Unsigned = why
	pushAPI := events.ImageVerified{Image: apiImage, Tag: "1.1.0", Digest: "sha256:api1.1.0", Unsigned: map[string]string{"shop-api": why}}
	signedAPI := events.ImageVerified{Image: apiImage, Tag: "1.1.0", Digest: "sha256:api1.1.0", SignedBy: map[string]string{"shop-api": "key release"}}
	pushFrontend := events.ImageVerified{Image: frontendImage, Tag: "1.1.0", Digest: "sha256:fe1.1.0"}
	held := rollout.Rollout{ID: "shop-1", Application: "shop", Phase: rollout.Progressing, StopsBefore: "w2", Unsigned: "shop-api: " + why,
		Versions: rollout.SetVersion{unsignedAPI, frontend("1.0.0")}}
	deployedUnsigned := st
	deployedUnsigned.DeployedVersions = rollout.SetVersion{unsignedAPI, frontend("1.0.0")}
	signed := func(m rollout.MemberVersion, by string) rollout.MemberVersion { m.SignedBy = by; return m }
	deployedSigned := st
	deployedSigned.DeployedVersions = rollout.SetVersion{signed(api("1.0.0"), "key release"), frontend("1.0.0")}
	signedInFlight := rollout.Rollout{ID: "shop-1", Application: "shop", Phase: rollout.Progressing, SignedBy: "key release",
		Versions: rollout.SetVersion{signed(api("1.1.0"), "key release"), frontend("1.0.0")}}
	type planned struct {
		Waves                           []string
		StopsBefore, Unsigned, SignedBy string
		Versions                        rollout.SetVersion
		Skip                            string
	}
	tests := []struct {
		name     string
		cfg      *config.Config
		st       rollout.AppState
		inFlight []rollout.Rollout
		v        events.ImageVerified
		want     planned
	}{
		{name: "the api unsigned: wave 1 only", cfg: cfg, st: st, v: pushAPI,
			want: planned{Waves: []string{"w1"}, StopsBefore: "w2", Unsigned: "shop-api: " + why, Versions: rollout.SetVersion{unsignedAPI, frontend("1.0.0")}}},
		{name: "the api signed: every wave", cfg: cfg, st: st, v: signedAPI,
			want: planned{Waves: []string{"w1", "w2"}, SignedBy: "key release", Versions: rollout.SetVersion{signed(api("1.1.0"), "key release"), frontend("1.0.0")}}},
		{name: "the api unsigned, the first wave requiring a signature", cfg: strict, st: st, v: pushAPI,
			want: planned{Skip: "no signature is trusted (shop-api: " + why + ") and wave w2 requires one"}},
		{name: "the frontend takes the api's unsigned entry along, held as it is", cfg: cfg, st: st, inFlight: []rollout.Rollout{held}, v: pushFrontend,
			want: planned{Waves: []string{"w1"}, StopsBefore: "w2", Unsigned: "shop-api: " + why, Versions: rollout.SetVersion{unsignedAPI, frontend("1.1.0")}}},
		{name: "the api signed since its rollout took it unsigned", cfg: cfg, st: st, inFlight: []rollout.Rollout{held}, v: signedAPI,
			want: planned{Waves: []string{"w1", "w2"}, SignedBy: "key release", Versions: rollout.SetVersion{signed(api("1.1.0"), "key release"), frontend("1.0.0")}}},
		{name: "the frontend takes the api's signed entry along from a rollout in flight, its signer kept", cfg: cfg, st: st, inFlight: []rollout.Rollout{signedInFlight}, v: pushFrontend,
			want: planned{Waves: []string{"w1", "w2"}, Versions: rollout.SetVersion{signed(api("1.1.0"), "key release"), frontend("1.1.0")}}},
		{name: "the frontend takes the api's deployed entry along, its signer kept", cfg: cfg, st: deployedSigned, v: pushFrontend,
			want: planned{Waves: []string{"w1", "w2"}, Versions: rollout.SetVersion{signed(api("1.0.0"), "key release"), frontend("1.1.0")}}},
		{name: "the frontend without verify: every wave", cfg: cfg, st: st, v: pushFrontend,
			want: planned{Waves: []string{"w1", "w2"}, Versions: rollout.SetVersion{api("1.0.0"), frontend("1.1.0")}}},
		{name: "a deployed entry is not held back again", cfg: cfg, st: deployedUnsigned, v: pushFrontend,
			want: planned{Waves: []string{"w1", "w2"}, Versions: rollout.SetVersion{api("1.1.0"), frontend("1.1.0")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ro, skip, err := rollout.Plan(tt.cfg, set, tt.st, tt.inFlight, tt.v, "shop-2", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := planned{StopsBefore: ro.StopsBefore, Unsigned: ro.Unsigned, SignedBy: ro.SignedBy, Versions: ro.Versions, Skip: skip}
			for _, w := range ro.Waves {
				got.Waves = append(got.Waves, w.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("the set's rollout (-want +got):\n%s", diff)
			}
		})
	}
}

// A run of a set of image members carries the set's version: the
// rollout's versions for an apply, its previous ones for a revert; a run
// of an application carries none. Catches: a revert run at the new
// versions (the failed api applied again instead of the previous one).
func TestRequestRunCarriesTheSetsVersion(t *testing.T) {
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterPending, "")})
	r.Versions, r.PreviousVersions = rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}, rollout.SetVersion{api("1.0.0")}
	plain := waves([]rollout.Cluster{cl("c1", rollout.ClusterPending, "")})
	members := func(r *rollout.Rollout, purpose string) []events.MemberImage {
		t.Helper()
		out, err := r.RequestRun(cause(t), &r.Waves[0].Clusters[0], purpose, "sha256:set", "", t0)
		if err != nil {
			t.Fatal(err)
		}
		var req events.PipelineRunRequested
		if err := out[0].DataAs(&req); err != nil {
			t.Fatal(err)
		}
		return req.Members
	}
	got := map[string][]events.MemberImage{
		"apply": members(r, events.PurposeApply), "revert": members(r, events.PurposeRevert), "application": members(plain, events.PurposeApply),
	}
	want := map[string][]events.MemberImage{
		"apply": {
			{Application: "shop-api", Image: apiImage, Tag: "1.1.0", Digest: "sha256:api1.1.0"},
			{Application: "shop-frontend", Image: frontendImage, Tag: "1.0.0", Digest: "sha256:fe1.0.0"},
		},
		"revert":      {{Application: "shop-api", Image: apiImage, Tag: "1.0.0", Digest: "sha256:api1.0.0"}},
		"application": nil,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the runs' members (-want +got):\n%s", d)
	}
}

// A member's view of its set's state: its entries as the deployed and
// latest versions, the set's rollouts of a version carrying it as its own
// (a catch-up and a rollout without its entry are not); a push's rollout
// records the pushed member's entry as its latest, the others' kept.
func TestMemberState(t *testing.T) {
	deployed := rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}
	st := rollout.AppState{Name: "shop", DeployedTag: deployed.Tag(), DeployedDigest: deployed.Digest(), DeployedVersions: deployed,
		LatestVersions: rollout.SetVersion{api("1.2.0"), frontend("1.0.0")}, LatestRollout: "r1"}
	inFlight := []rollout.Rollout{
		{ID: "r2", Application: "shop", Phase: rollout.Progressing, Versions: rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}},
		{ID: "cu", Application: "shop", Phase: rollout.Progressing, Kind: rollout.KindCatchUp, Versions: deployed},
		{ID: "r3", Application: "shop", Phase: rollout.Queued, Versions: rollout.SetVersion{frontend("1.0.1")}},
	}
	mst, mine := rollout.MemberState("shop-api", st, inFlight)
	wantSt := rollout.AppState{Name: "shop-api", DeployedTag: "1.0.0", DeployedDigest: "sha256:api1.0.0", LatestTag: "1.2.0"}
	wantMine := []rollout.Rollout{{ID: "r2", Application: "shop-api", Phase: rollout.Progressing, Tag: "1.1.0", Digest: "sha256:api1.1.0"}}
	if diff := cmp.Diff([]any{wantSt, wantMine}, []any{mst, mine}); diff != "" {
		t.Errorf("the api's view (-want +got):\n%s", diff)
	}

	ro := rollout.Rollout{Members: []string{"shop-api", "shop-frontend"}, Versions: rollout.SetVersion{api("1.1.0"), frontend("1.0.2")}}
	st.RecordLatest(ro, events.ImageVerified{Image: frontendImage, Tag: "1.0.2", Digest: "sha256:fe1.0.2"})
	if diff := cmp.Diff(rollout.SetVersion{api("1.2.0"), frontend("1.0.2")}, st.LatestVersions); diff != "" {
		t.Errorf("latest after the frontend's push (-want +got):\n%s", diff)
	}
	st.RecordLatest(rollout.Rollout{Tag: "1.3.0"}, events.ImageVerified{Image: apiImage, Tag: "1.3.0", Digest: "sha256:x"})
	if diff := cmp.Diff(rollout.SetVersion{api("1.2.0"), frontend("1.0.2")}, st.LatestVersions); diff != "" {
		t.Errorf("an application's rollout changed the latest versions (-want +got):\n%s", diff)
	}
}
