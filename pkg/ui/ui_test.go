package ui_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/ui"
)

// token is the API token (named ops) of the server serve starts.
const token = "s3cret"

// bearer authenticates a fetch.
var bearer = http.Header{"Authorization": {"Bearer " + token}}

// serve serves the UI, and the API's whoami, behind the authentication of
// token; opts configure it.
func serve(t *testing.T, opts ...api.AuthnOption) (*httptest.Server, *ui.Handler) {
	t.Helper()
	authn, err := api.NewAuthn(map[string]string{"ops": token}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(authn, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	apis := http.NewServeMux()
	api.New(nil, nil, nil, nil).Register(apis)
	mux.Handle("/api/", authn.Require(apis))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h
}

// answer is a response, read.
type answer struct {
	StatusCode int
	Header     http.Header
}

func fetch(t *testing.T, url string, header http.Header) (answer, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	// The transport would ask for gzip and decode it behind our back.
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header}, body
}

func TestServesThePages(t *testing.T) {
	srv, _ := serve(t)
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/ui/", "text/html; charset=utf-8", 200},
		{"/ui/app.js", "text/javascript; charset=utf-8", 200},
		{"/ui/app.css", "text/css; charset=utf-8", 200},
		{"/ui/nope.js", "text/plain; charset=utf-8", 404},
	} {
		resp, _ := fetch(t, srv.URL+tc.path, bearer)
		got := []any{resp.StatusCode, resp.Header.Get("Content-Type")}
		if diff := cmp.Diff([]any{tc.status, tc.ctype}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.path, diff)
		}
		if tc.status == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: no CSP", tc.path)
		}
	}
	// / leads to the UI.
	resp, _ := fetch(t, srv.URL+"/", nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestGzipAndETag(t *testing.T) {
	srv, _ := serve(t)
	plain, body := fetch(t, srv.URL+"/ui/app.js", nil)
	zipped, zbody := fetch(t, srv.URL+"/ui/app.js", http.Header{"Accept-Encoding": {"br, gzip;q=0.9"}})
	if zipped.Header.Get("Content-Encoding") != "gzip" || len(zbody) >= len(body) {
		t.Fatalf("gzip: %q, %d bytes of %d", zipped.Header.Get("Content-Encoding"), len(zbody), len(body))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(zbody)))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if string(unzipped) != string(body) {
		t.Error("the gzipped asset is not the asset")
	}
	again, _ := fetch(t, srv.URL+"/ui/app.js", http.Header{"If-None-Match": {plain.Header.Get("ETag")}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", again.StatusCode)
	}
}

// TestPageWeight keeps everything a page loads under the 150 kB
// (gzipped, as browsers fetch it), and loaded from flotilla only.
func TestPageWeight(t *testing.T) {
	srv, h := serve(t)
	total := 0
	for _, name := range h.Names() {
		_, body := fetch(t, srv.URL+"/ui/"+name, http.Header{"Accept-Encoding": {"gzip"}, "Authorization": bearer["Authorization"]})
		total += len(body)
	}
	if total > 150_000 {
		t.Errorf("the UI weighs %d bytes gzipped, over 150 kB", total)
	}
	t.Logf("page weight: %d bytes gzipped", total)
	_, index := fetch(t, srv.URL+"/ui/", bearer)
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(index), -1) {
		if strings.Contains(m[1], "//") {
			t.Errorf("index.html loads %s from elsewhere", m[1])
		}
	}
}
