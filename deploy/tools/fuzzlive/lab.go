package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

// lab is what every flotilla of a run shares: the binary, the generated
// config, the sentinel registry and the fuzz targets.
type lab struct {
	dir          string
	bin          string
	setup        *setup
	registry     *sentinelRegistry
	jwks         *httptest.Server // serves gar's keys where jwksFile alone is refused
	targets      []*target
	byName       map[string]*target
	client       *http.Client
	logLevel     string
	checkTimeout time.Duration
	flotillas    int
}

func newLab(ctx context.Context, o options, dir string) (*lab, error) {
	root, err := moduleRoot(o.root)
	if err != nil {
		return nil, err
	}
	logf("building flotilla from %s", root)
	bin, err := buildFlotilla(ctx, root, dir)
	if err != nil {
		return nil, err
	}
	reg := startRegistry()
	// The fleet's one cluster: an address nothing listens on (see doc.go).
	clusterAddr, err := proc.FreeAddr(ctx)
	if err != nil {
		reg.close()
		return nil, err
	}
	l := &lab{dir: dir, bin: bin, registry: reg, byName: map[string]*target{},
		client: newClient(o.workers), logLevel: o.logLevel, checkTimeout: o.checkTimeout}
	if err := l.writeSetup(reg.host(), clusterAddr); err != nil {
		l.close()
		return nil, err
	}
	// The senders' fixtures; a tree from before events/intake kept them
	// in events/testdata.
	testdata := filepath.Join(root, "events", "intake", "testdata")
	if _, err := os.Stat(testdata); err != nil {
		testdata = filepath.Join(root, "events", "testdata")
	}
	for _, rc := range l.setup.receivers {
		t, err := newTarget(rc.name, rc.sender, testdata, rc.creds)
		if err != nil {
			l.close()
			return nil, err
		}
		l.targets = append(l.targets, t)
		l.byName[t.name] = t
	}
	return l, nil
}

func (l *lab) close() {
	l.registry.close()
	if l.jwks != nil {
		l.jwks.Close()
	}
}

// writeSetup writes the config, with gar's keys in a JWKS file, or served
// on loopback where this tree's config validation refuses jwksFile alone.
func (l *lab) writeSetup(registryHost, clusterAddr string) error {
	iss, err := newOIDCIssuer(garIssuer, garAudience, garServiceAccount)
	if err != nil {
		return err
	}
	if l.setup, err = writeSetup(l.dir, registryHost, clusterAddr, iss, ""); err != nil {
		return err
	}
	refused, err := jwksFileRefused(l.setup.config)
	if err != nil || !refused {
		return err
	}
	jwks, err := iss.jwks()
	if err != nil {
		return err
	}
	l.jwks = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	}))
	logf("this tree's config refuses oidc.jwksFile without jwksURL: gar's keys are served at %s", l.jwks.URL)
	if l.setup, err = writeSetup(l.dir, registryHost, clusterAddr, iss, l.jwks.URL); err != nil {
		return err
	}
	_, err = jwksFileRefused(l.setup.config)
	return err
}

// moduleRoot finds the directory of go.mod from dir upwards.
func moduleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or above: run from the flotilla module", dir)
		}
	}
}

// startFlotilla starts a flotilla on a fresh data dir and a free port.
func (l *lab) startFlotilla(ctx context.Context) (*flotilla, error) {
	l.flotillas++
	dir := filepath.Join(l.dir, fmt.Sprintf("flotilla-%d", l.flotillas))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := proc.FreeAddr(ctx)
	if err != nil {
		return nil, err
	}
	f := &flotilla{bin: l.bin, config: l.setup.config, dataDir: filepath.Join(dir, "data"), addr: addr,
		log: filepath.Join(dir, "flotilla.log"), logLevel: l.logLevel, client: l.client, token: l.setup.apiToken}
	if err := f.start(ctx); err != nil {
		return f, err
	}
	return f, nil
}

// check is one end check and how it went.
type check struct {
	name string
	err  error
	took time.Duration
	// skipped: an earlier check failed in a way that makes this one moot.
	skipped bool
}

func (c check) ok() bool { return c.err == nil && !c.skipped }

// verify runs the end checks on f, in order: it is up and /healthz answers
// 200; no sender panicked (the intake's own count); the engine handles a
// push posted now and everything journaled before it (sentinel-1, see
// sentinel); kill -9 and a restart on the same data dir and port come up;
// the same after the restart (sentinel-2); it is still up and healthy. f is
// stopped at the end.
func (l *lab) verify(ctx context.Context, f *flotilla) []check {
	var checks []check
	run := func(name string, skip bool, fn func() error) bool {
		c := check{name: name, skipped: skip}
		if !skip {
			start := time.Now()
			c.err = fn()
			c.took = time.Since(start)
		}
		checks = append(checks, c)
		return c.ok()
	}
	defer f.stop()
	up := run("flotilla up, GET /healthz 200", false, func() error { return checkAlive(ctx, f) })
	run("no sender panicked (flotilla_webhooks_total{outcome=\"panic\"} = 0)", !up, func() error {
		m, err := f.metrics(ctx)
		if err != nil {
			return err
		}
		if n := m.sum("flotilla_webhooks_total", `outcome="panic"`); n > 0 {
			return fmt.Errorf("%0.f deliveries made a sender panic (500)", n)
		}
		return nil
	})
	run("engine handles a push posted now and all before it ("+sentinelApps[0]+" rolled out, nothing in flight)", !up, func() error {
		took, err := sentinel(ctx, f, l.registry, l.setup.events, sentinelApps[0], l.checkTimeout)
		if err == nil {
			logf("nothing in flight %s after the push of %s", took.Round(time.Millisecond), sentinelApps[0])
		}
		return err
	})
	restarted := run("kill -9, restart on the same data dir: /readyz 200", false, func() error {
		f.kill()
		return f.start(ctx)
	})
	run("after the restart, too ("+sentinelApps[1]+" rolled out, nothing in flight)", !restarted, func() error {
		took, err := sentinel(ctx, f, l.registry, l.setup.events, sentinelApps[1], l.checkTimeout)
		if err == nil {
			logf("nothing in flight %s after the push of %s", took.Round(time.Millisecond), sentinelApps[1])
		}
		return err
	})
	run("flotilla up, GET /healthz 200 at the end", !restarted, func() error { return checkAlive(ctx, f) })
	return checks
}

func failed(checks []check) bool {
	for _, c := range checks {
		if c.err != nil {
			return true
		}
	}
	return false
}

// trial posts recs, signed anew, to a fresh flotilla one after another, then
// runs the end checks, the first of which is that no request got a 5xx or
// no answer (posted one at a time to an idle flotilla, not even the
// documented 503 is excused). died is the index of the request after which
// flotilla was found dead (-1 if it was not).
func (l *lab) trial(ctx context.Context, recs []record) (checks []check, died int, err error) {
	f, err := l.startFlotilla(ctx)
	if err != nil {
		if f != nil {
			f.kill()
		}
		return nil, -1, err
	}
	r := rand.New(rand.NewSource(1))
	died = -1
	var refused []string
	for i, rec := range recs {
		t, ok := l.byName[rec.Request.Receiver]
		if !ok {
			f.stop()
			return nil, -1, fmt.Errorf("request %d: no receiver %q in this run's config", i, rec.Request.Receiver)
		}
		req := rec.Request.clone()
		if err := t.signer.sign(r, req); err != nil {
			f.stop()
			return nil, -1, err
		}
		res := post(ctx, l.client, f.url(""), req)
		logf("request %d (%s %s): %s", i, req.Receiver, req.Fixture, res.column())
		if res.verdict() != verdictOK {
			refused = append(refused, fmt.Sprintf("request %d (%s): %s %s", i, req.Receiver, res.column(), strings.TrimSpace(truncate(string(res.body), 200))))
		}
		if !f.alive() {
			died = i
			break
		}
	}
	var answers error
	if len(refused) > 0 {
		answers = errors.New(strings.Join(refused, "\n"))
	}
	// Give the runtime a moment with what was posted before checking.
	time.Sleep(time.Second)
	checks = append([]check{{name: "every request answered, none with a 5xx", err: answers}}, l.verify(ctx, f)...)
	return checks, died, nil
}

// bisect narrows recs, which fail the end checks together, down to the
// fewest that still do, assuming one request is to blame; when neither half
// fails alone, both halves are returned.
func (l *lab) bisect(ctx context.Context, recs []record) ([]record, error) {
	for len(recs) > 1 {
		half := len(recs) / 2
		logf("bisect: %d requests left; trying the first %d", len(recs), half)
		checks, died, err := l.trial(ctx, recs[:half])
		if err != nil {
			return recs, err
		}
		if failed(checks) {
			recs = recs[:half]
			if died >= 0 {
				recs = recs[:died+1]
			}
			continue
		}
		logf("bisect: trying the last %d", len(recs)-half)
		checks, died, err = l.trial(ctx, recs[half:])
		if err != nil {
			return recs, err
		}
		if !failed(checks) {
			logf("bisect: neither half fails alone")
			return recs, nil
		}
		recs = recs[half:]
		if died >= 0 {
			recs = recs[:died+1]
		}
	}
	return recs, nil
}
