package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// server.trustedProxies: CIDRs and IPs parsed to prefixes; anything else
// is an error naming the entry.
func TestTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		proxies []string
		want    []netip.Prefix
		wantErr string
	}{
		{"none", nil, []netip.Prefix{}, ""},
		{"CIDRs and addresses", []string{"10.0.0.0/8", "192.0.2.10", "2001:db8::/32", "::ffff:192.0.2.11", "10.1.2.3/8"},
			[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::/32"),
				netip.MustParsePrefix("192.0.2.11/32"), netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"a name", []string{"10.0.0.0/8", "proxy.local"}, nil,
			`server.trustedProxies[1]: "proxy.local" is neither an IP address nor a CIDR (such as 10.0.0.0/8)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Server: Server{TrustedProxies: tt.proxies}}
			v := &validator{}
			v.server(&c.Server)
			var errs []string
			for _, p := range v.problems {
				if strings.HasPrefix(p.Path, "server.trustedProxies") {
					errs = append(errs, p.Path+": "+p.Message)
				}
			}
			if diff := cmp.Diff(tt.wantErr, strings.Join(errs, "\n")); diff != "" {
				t.Errorf("validation (-want +got):\n%s", diff)
			}
			if tt.wantErr == "" {
				if diff := cmp.Diff(tt.want, c.Server.Proxies(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
					t.Errorf("Proxies (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// config/example.yaml's commented trustedProxies line, uncommented, is
// valid and says what it shows.
func TestExampleTrustedProxies(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const commented = "  # trustedProxies: "
	if !strings.Contains(string(data), commented) {
		t.Fatalf("example.yaml has no commented %q line", commented)
	}
	doc := strings.Replace(string(data), commented, "  trustedProxies: ", 1)
	tmp := t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(tmp, c, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	doc = strings.ReplaceAll(doc, fleetDir, tmp+"/")
	for _, env := range []string{"FLOTILLA_REGISTRY_TOKEN", "FLOTILLA_GITHUB_SECRET", "FLOTILLA_FLAGGER_TOKEN", "FLOTILLA_DEPLOYMENTS_TOKEN", "FLOTILLA_API_TOKEN"} {
		t.Setenv(env, "x")
	}
	c, err := Parse([]byte(doc), filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("example.yaml with trustedProxies:\n%v", err)
	}
	if diff := cmp.Diff([]string{"10.0.0.0/8", "192.0.2.10"}, c.Server.TrustedProxies); diff != "" {
		t.Errorf("trustedProxies (-want +got):\n%s", diff)
	}
}
