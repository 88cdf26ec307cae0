package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// fleetAPI serves the real API over a real store: rollouts r1 (in
// flight on c1) and r2 (newer, succeeded on c1 and c2) of application
// shop, and clusters c1 (wave canary) and c2 (wave prod).
func fleetAPI(t *testing.T) string {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for _, r := range []rollout.Rollout{
		{ID: "r1", Application: "shop", Tag: "1.1.0", Digest: "sha256:11", Phase: rollout.Progressing,
			Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterProgressing}}}}},
		{ID: "r2", Application: "cart", Tag: "2.0.0", Digest: "sha256:20", Phase: rollout.Progressing,
			Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded}}},
				{Name: "prod", Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterSucceeded}}}}},
	} {
		if _, err := repo.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // r2 the newer
	}
	if _, err := repo.Update(t.Context(), "r2", func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return nil }); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.New(repo, nil, s, nil).WithAuditLog(s).
		WithApplicationInfos(repo, api.ApplicationInfo{Name: "cart", Kind: api.KindImage, Repository: "r.test/cart"},
			api.ApplicationInfo{Name: "shop", Kind: api.KindImage, Repository: "r.test/shop"}).
		WithClusters(api.ClusterInfo{Name: "c1", Labels: map[string]string{"env": "dev", "zone": "a"}, Wave: "canary"},
			api.ClusterInfo{Name: "c2", Labels: map[string]string{"env": "prod"}, Wave: "prod", Source: "fleet.discovery.argocd: Secret argocd/c2"}).
		Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The kubectl habits: -o in every format each command accepts, an
// unknown format or kind a usage error (exit 2) printing nothing on
// stdout, get of one NAME, completion of names from the API.
func TestKubectlHabits(t *testing.T) {
	url := fleetAPI(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string // a part of it
	}{
		{name: "rollouts by name, newest first", args: []string{"get", "rollouts", "-o", "name"}, wantStdout: "rollout/r1\nrollout/r2\n"},
		{name: "one rollout by name", args: []string{"get", "ro", "r2", "-o", "name"}, wantStdout: "rollout/r2\n"},
		{name: "applications by name", args: []string{"get", "apps", "-o", "name"}, wantStdout: "application/cart\napplication/shop\n"},
		{name: "clusters by name", args: []string{"get", "clusters", "-o", "name"}, wantStdout: "cluster/c1\ncluster/c2\n"},
		{name: "clusters' table", args: []string{"get", "clusters"},
			wantStdout: "NAME  WAVE    HEALTH  LABELS          APPLICATIONS\n" +
				"c1    canary  -       env=dev,zone=a  cart=2.0.0,shop=-->1.1.0\n" +
				"c2    prod    -       env=prod        cart=2.0.0\n"},
		{name: "one cluster, wide", args: []string{"get", "cluster", "c2", "-o", "wide"},
			wantStdout: "NAME  WAVE  HEALTH  LABELS    APPLICATIONS  KUBERNETES  CANARIES  SOURCE                    DETAIL\n" +
				"c2    prod  -       env=prod  cart=2.0.0    -           -         argocd: Secret argocd/c2  -\n"},
		{name: "an unknown cluster", args: []string{"get", "clusters", "c9"}, wantCode: exitFailure, wantStderr: `cluster "c9" not found: the fleet's are c1, c2`},
		{name: "an unknown rollout", args: []string{"get", "rollouts", "r9"}, wantCode: exitFailure, wantStderr: "r9"},
		{name: "the table asked for by name", args: []string{"get", "clusters", "c1", "-o", "table"},
			wantStdout: "NAME  WAVE    HEALTH  LABELS          APPLICATIONS\nc1    canary  -       env=dev,zone=a  cart=2.0.0,shop=-->1.1.0\n"},
		{name: "an unknown format", args: []string{"get", "rollouts", "-o", "bogus"}, wantCode: exitUsage,
			wantStderr: `unknown output format "bogus": want json, yaml, wide, name or table`},
		{name: "a format describe does not print", args: []string{"describe", "rollout", "r1", "-o", "name"}, wantCode: exitUsage,
			wantStderr: `unknown output format "name": want json, yaml or text`},
		{name: "a format the audit does not print", args: []string{"get", "audit", "-o", "wide"}, wantCode: exitUsage, wantStderr: "want json, yaml or table"},
		{name: "a format version does not print", args: []string{"version", "-o", "name"}, wantCode: exitUsage, wantStderr: "want json, yaml or text"},
		{name: "get without a kind", args: []string{"get"}, wantCode: exitUsage, wantStderr: "flotilla get needs a kind: applications, audit, clusters, rollouts"},
		{name: "get of an unknown kind", args: []string{"get", "pods"}, wantCode: exitUsage, wantStderr: `unknown kind "pods" for "flotilla get": want applications, audit, clusters, rollouts`},
		{name: "describe without a kind", args: []string{"describe"}, wantCode: exitUsage, wantStderr: "flotilla describe needs a kind: application, rollout"},
		{name: "a missing argument", args: []string{"describe", "rollout"}, wantCode: exitUsage, wantStderr: "accepts 1 arg(s), received 0"},
		{name: "a required flag missing", args: []string{"token", "create", "ci"}, wantCode: exitUsage, wantStderr: `required flag(s) "project", "role" not set`},
		{name: "an unknown command", args: []string{"rollout"}, wantCode: exitUsage, wantStderr: `unknown command "rollout" for "flotilla"`},
		{name: "--watch and -o", args: []string{"get", "rollouts", "--watch", "-o", "json"}, wantCode: exitUsage, wantStderr: "--watch redraws the table"},
		{name: "--timeout without --watch", args: []string{"describe", "rollout", "r1", "--timeout", "1s"}, wantCode: exitUsage, wantStderr: "--timeout bounds --watch"},
		{name: "rollouts completed", args: []string{"__complete", "get", "rollouts", "--server", url, ""},
			wantStdout: "r1\tshop 1.1.0 Progressing\nr2\tcart 2.0.0 Succeeded\n:4\n"},
		{name: "rollouts completed from a prefix", args: []string{"__complete", "approve", "--server", url, "r2"},
			wantStdout: "r2\tcart 2.0.0 Succeeded\n:4\n"},
		{name: "applications completed", args: []string{"__complete", "describe", "application", "--server", url, ""},
			wantStdout: "cart\timage r.test/cart\nshop\timage r.test/shop\n:4\n"},
		{name: "clusters completed", args: []string{"__complete", "get", "clusters", "--server", url, "c"},
			wantStdout: "c1\twave canary env=dev,zone=a\nc2\twave prod env=prod\n:4\n"},
		{name: "formats completed", args: []string{"__complete", "get", "clusters", "-o", ""},
			wantStdout: "table\njson\nyaml\nwide\nname\n:4\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := tt.args
			if args[0] == "get" || args[0] == "describe" {
				args = append(args, "--server", url)
			}
			code := Main(args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr %q", code, tt.wantCode, stderr.String())
			}
			got := stdout.String()
			if tt.args[0] == "__complete" { // then cobra's "Completion ended with directive" line
				got = got[:strings.LastIndex(got, ":")+3]
			}
			if diff := cmp.Diff(tt.wantStdout, got); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to say %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// -o yaml and -o json print the same data, the API's, YAML as block YAML
// (not JSON, which is YAML too); for one NAME the object, not a list.
func TestOutputJSONAndYAML(t *testing.T) {
	url := fleetAPI(t)
	for _, tt := range []struct {
		args []string
		into func() any
	}{
		{[]string{"get", "rollouts"}, func() any { return &[]rollout.Rollout{} }},
		{[]string{"get", "rollouts", "r1"}, func() any { return &rollout.Rollout{} }},
		{[]string{"describe", "rollout", "r2"}, func() any { return &rollout.Rollout{} }},
		{[]string{"get", "applications"}, func() any { return &[]api.ApplicationView{} }},
		{[]string{"get", "application", "shop"}, func() any { return &api.ApplicationView{} }},
		{[]string{"describe", "application", "shop"}, func() any { return &api.ApplicationView{} }},
		{[]string{"get", "clusters"}, func() any { return &[]api.ClusterView{} }},
		{[]string{"get", "clusters", "c1"}, func() any { return &api.ClusterView{} }},
		{[]string{"get", "audit"}, func() any { return &api.AuditPage{} }},
		{[]string{"version"}, func() any { return &map[string]string{} }},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := map[string]any{}
			for _, format := range []string{"json", "yaml"} {
				var stdout, stderr bytes.Buffer
				args := append(tt.args, "-o", format)
				if args[0] != "version" {
					args = append(args, "--server", url)
				}
				if code := Main(args, &stdout, &stderr); code != 0 {
					t.Fatalf("-o %s: exit %d: %s", format, code, stderr.String())
				}
				v := tt.into()
				unmarshal := json.Unmarshal
				if format == "yaml" {
					unmarshal = func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }
					if first := strings.TrimSpace(stdout.String())[0]; first == '{' || first == '[' {
						t.Errorf("-o yaml printed JSON:\n%s", stdout.String())
					}
				}
				if err := unmarshal(stdout.Bytes(), v); err != nil {
					t.Fatalf("-o %s printed what does not decode: %v\n%s", format, err, stdout.String())
				}
				got[format] = v
			}
			if diff := cmp.Diff(got["json"], got["yaml"]); diff != "" {
				t.Errorf("-o json and -o yaml differ (-json +yaml):\n%s", diff)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"get", "clusters", "-o", "json", "--server", url}, &stdout, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	var cs []api.ClusterView
	if err := json.Unmarshal(stdout.Bytes(), &cs); err != nil {
		t.Fatal(err)
	}
	var waves []string
	for _, c := range cs {
		waves = append(waves, c.Name+" "+c.Wave)
	}
	if diff := cmp.Diff([]string{"c1 canary", "c2 prod"}, waves); diff != "" {
		t.Errorf("clusters' waves (-want +got):\n%s", diff)
	}
}

// The -o wide tables have the default's columns and more.
func TestWideTables(t *testing.T) {
	url := fleetAPI(t)
	for _, tt := range []struct {
		kind string
		more []string
	}{
		{"rollouts", []string{"IMAGE", "SOURCE", "PUSHED BY", "CREATED", "REASON"}},
		{"applications", []string{"KIND", "REPOSITORY", "DIGEST", "ROLLOUT"}},
		{"clusters", []string{"KUBERNETES", "CANARIES", "SOURCE", "DETAIL"}},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			header := func(args ...string) string {
				var stdout, stderr bytes.Buffer
				if code := Main(append([]string{"get", tt.kind, "--server", url}, args...), &stdout, &stderr); code != 0 {
					t.Fatal(stderr.String())
				}
				return strings.SplitN(stdout.String(), "\n", 2)[0]
			}
			table, wide := header(), header("-o", "wide")
			for _, col := range append(strings.Fields(table), tt.more...) {
				if !strings.Contains(wide, col) {
					t.Errorf("-o wide's header %q lacks %s", wide, col)
				}
			}
		})
	}
}

// describe rollout --watch --timeout gives up with exit code 5 when the
// rollout has not ended by then.
func TestDescribeWatchTimeout(t *testing.T) {
	url := fleetAPI(t)
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main([]string{"describe", "rollout", "r1", "--watch", "--timeout", "500ms", "--server", url}, &stdout, &stderr)
	if code != exitTimeout || !strings.Contains(stderr.String(), "rollout r1 has not ended after --timeout 500ms: Progressing, wave 1 of 1") {
		t.Errorf("exit %d, stderr %q: want %d and what it waited for", code, stderr.String(), exitTimeout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("--timeout 500ms returned after %s", d)
	}
	if !strings.Contains(stdout.String(), "Phase:        Progressing") {
		t.Errorf("it drew no view:\n%s", stdout.String())
	}
}

// --log-format: text or JSON, text by default on a terminal only.
func TestLogFormat(t *testing.T) {
	tty, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tty.Close() }()
	for _, tt := range []struct {
		name, format string
		want         string
	}{
		{name: "text", format: "text", want: "level=INFO msg=hello k=v\n"},
		{name: "json", format: "json", want: `{"level":"INFO","msg":"hello","k":"v"}` + "\n"},
		{name: "default, not a terminal", format: "", want: `{"level":"INFO","msg":"hello","k":"v"}` + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			h, err := logHandler(&b, tt.format, slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			slog.New(noTime{h}).Info("hello", "k", "v")
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("log line (-want +got):\n%s", diff)
			}
		})
	}
	// /dev/null is a character device, as a terminal is.
	h, err := logHandler(tty, "", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.(*slog.TextHandler); !ok {
		t.Errorf("on a terminal the default handler is %T, want text", h)
	}
	if _, err := logHandler(tty, "xml", slog.LevelInfo); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--log-format xml: %v, want a usage error naming the formats", err)
	}
}

// noTime drops records' times, so log lines compare.
type noTime struct{ slog.Handler }

func (h noTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Time{}
	return h.Handler.Handle(ctx, r)
}

// TestSourceText: where a cluster comes from, as get clusters -o wide
// says it.
func TestSourceText(t *testing.T) {
	for in, want := range map[string]string{
		"": "file",
		"fleet.discovery.argocd: Secret argocd/c2":   "argocd: Secret argocd/c2",
		"server.resources: Cluster platform/prod-eu": "resources: Cluster platform/prod-eu",
	} {
		if got := sourceText(in); got != want {
			t.Errorf("sourceText(%q) = %q, want %q", in, got, want)
		}
	}
}
