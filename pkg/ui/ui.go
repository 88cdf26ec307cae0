package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Path is where the UI is served.
const Path = "/ui/"

// csp lets the pages load only what flotilla serves; their one form is
// the logout's, to flotilla.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one file, ready to serve.
type asset struct {
	body, gzipped []byte
	etag, ctype   string
}

// Handler serves the UI under Path: index.html for Path itself, each asset
// by name, gzipped for clients that take it, with an ETag. Its pages
// (index.html) need an identity, which auth finds; without one they answer
// 401 with the login page. The assets (app.js, app.css) carry no data and
// are open, as are the login page and the logout.
type Handler struct {
	files map[string]asset
	auth  Auth
	log   *slog.Logger
	sso   bool // the login page offers single sign-on (sso.go)
}

// New reads the embedded assets; auth authenticates the pages and logs in
// and out (required); log (default none) records each login.
func New(auth Auth, log *slog.Logger) (*Handler, error) {
	if auth == nil {
		return nil, fmt.Errorf("ui: no authentication given")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{files: map[string]asset{}, auth: auth, log: log}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		a, err := newAsset(p, body)
		if err != nil {
			return err
		}
		h.files[strings.TrimPrefix(p, "assets/")] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: reading the assets: %w", err)
	}
	return h, nil
}

func newAsset(name string, body []byte) (asset, error) {
	var z bytes.Buffer
	w, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if err != nil {
		return asset{}, err
	}
	if _, err := w.Write(body); err != nil {
		return asset{}, err
	}
	if err := w.Close(); err != nil {
		return asset{}, err
	}
	sum := sha256.Sum256(body)
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return asset{body: body, gzipped: z.Bytes(), etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}, nil
}

// Names lists the assets (tests, page weight).
func (h *Handler) Names() []string {
	var out []string
	for n := range h.files {
		out = append(out, n)
	}
	return out
}

// Register adds the UI's routes to mux: Path, the login page
// (LoginPath) and the logout (LogoutPath), and / redirecting to Path.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("GET "+Path, h)
	mux.HandleFunc("GET "+LoginPath, h.loginForm)
	mux.HandleFunc("POST "+LoginPath, h.login)
	mux.HandleFunc("POST "+LogoutPath, h.logout)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path, http.StatusFound)
	})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Path)
	if name == "" {
		name = "index.html"
	}
	a, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if page(name) {
		if _, err := h.auth.Authenticate(r); err != nil {
			h.refused(w, r, err)
			return
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	// Revalidated each time: a new flotilla serves new assets at once (and
	// a page is authenticated again; no shared cache keeps one).
	hd.Set("Cache-Control", "no-cache")
	if page(name) {
		hd.Set("Cache-Control", "private, no-cache")
	}
	hd.Set("ETag", a.etag)
	hd.Set("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = a.gzipped
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

// page says whether the asset name is a page (which shows data, and needs
// an identity) rather than a script or stylesheet (which carry none).
func page(name string) bool { return path.Ext(name) == ".html" }

func acceptsGzip(r *http.Request) bool {
	for _, e := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if name, _, _ := strings.Cut(strings.TrimSpace(e), ";"); name == "gzip" {
			return true
		}
	}
	return false
}
