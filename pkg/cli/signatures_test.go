package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/cli"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// describe rollout says what verify found of the version: for a release
// set of image members each entry's signer or why it is unsigned, for an
// application its signer or why not; and the wave an unsigned rollout
// stops before. Catches: a set showing only the pushed member's signer
// (the api's unsigned entry taken along by the frontend's push unseen),
// an entry's reason dropped, and signature lines for a set whose members
// verify none.
func TestDescribeRolloutSignatures(t *testing.T) {
	const why = "registry.test/shop/api@sha256:0123 is not signed"
	api := rollout.MemberVersion{Application: "shop-api", Image: "registry.test/shop/api", Tag: "1.1.0", Digest: "sha256:0123", Unsigned: why}
	apiSigned := rollout.MemberVersion{Application: "shop-api", Image: "registry.test/shop/api", Tag: "1.0.0", Digest: "sha256:0100", SignedBy: "key release"}
	fe := rollout.MemberVersion{Application: "shop-frontend", Image: "registry.test/shop/frontend", Tag: "2.1.0", Digest: "sha256:fe21"}
	set := func(stops string, v ...rollout.MemberVersion) rollout.Rollout {
		return rollout.Rollout{ID: "shop-1", Application: "shop", Members: []string{"shop-api", "shop-frontend"}, Versions: v, StopsBefore: stops,
			SignedBy: "ignored for a set", Unsigned: "ignored for a set"}
	}
	tests := []struct {
		name string
		r    rollout.Rollout
		want []string
	}{
		{name: "a set: the api unsigned, the frontend verifying none", r: set("production", api, fe), want: []string{
			"Signatures:   shop-api 1.1.0: unsigned: " + why,
			"              shop-frontend 2.1.0: no signer recorded",
			"Stops before: production (the first wave requiring a signature)",
		}},
		{name: "a set: the api's signed entry taken along", r: set("", apiSigned, fe), want: []string{
			"Signatures:   shop-api 1.0.0: signed by key release",
			"              shop-frontend 2.1.0: no signer recorded",
		}},
		{name: "a set whose members verify none", r: set("", fe)},
		{name: "an application signed", r: rollout.Rollout{ID: "web-1", SignedBy: "key release"}, want: []string{"Signed by:    key release"}},
		{name: "an application unsigned", r: rollout.Rollout{ID: "web-1", Unsigned: why, StopsBefore: "production"}, want: []string{
			"Unsigned:     " + why,
			"Stops before: production (the first wave requiring a signature)",
		}},
		{name: "an application verifying none", r: rollout.Rollout{ID: "web-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			cli.DescribeRollout(&b, tt.r)
			header, _, _ := strings.Cut(b.String(), "\n\n")
			var got []string
			for _, l := range strings.Split(header, "\n") {
				for _, p := range []string{"Signatures:", "Signed by:", "Unsigned:", "Stops before:", "              "} {
					if strings.HasPrefix(l, p) {
						got = append(got, l)
						break
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("describe's signature lines (-want +got):\n%s\nall:\n%s", diff, b.String())
			}
		})
	}
}
