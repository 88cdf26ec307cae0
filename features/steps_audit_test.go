package features

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"time"

	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/cdevents"
)

// The audit (#31 step 2): every control is journaled with a record of who
// sent it, from where and why. These steps send controls as users do (the
// CLI, or a client's HTTP request), note when each was sent, and read the
// records back as users do: `flotilla get audit` (the real binary), the
// rollout's timeline from the API and in the web UI.

// auditWorld is what the audit's steps sent, and the reverse proxy a step
// put in front of flotilla.
type auditWorld struct {
	sent  []sentControl
	proxy *httptest.Server
}

// sentControl is a control a step sent, between from and to.
type sentControl struct {
	name, action, reason string
	from, to             time.Time
}

func (s *scenario) registerAuditSteps(sc *godog.ScenarioContext) {
	sc.Step(`^"([^"]*)" (pauses|resumes) the rollout of "([^"]*)" with the reason "([^"]*)"$`, s.auditPauseResume)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of "([^"]*)" with the reason "([^"]*)"$`, s.auditApprove)
	sc.Step("^`flotilla get audit` lists, newest first, at the times they were sent:$", s.auditLists)
	sc.Step("^`flotilla get audit --application (\\S+) --since (\\S+) -o json` names the rollout of \"([^\"]*)\" and the tokens \"([^\"]*)\" that sent them$", s.auditJSON)
	sc.Step(`^the timeline of the rollout of "([^"]*)" has each audit record right after its control$`, s.auditTimeline)
	sc.Step(`^the web UI's timeline of the rollout of "([^"]*)" says "([^"]*)"$`, s.auditUITimeline)
	sc.Step(`^flotilla trusts a reverse proxy that reaches it from (\S+) \(server\.trustedProxies\)$`, s.auditTrustedProxy)
	sc.Step("^`flotilla fleet stop --reason \"([^\"]*)\"` is run through the proxy$", s.auditStopThroughProxy)
	sc.Step("^`fleet (start|stop)` is sent (straight to flotilla|through the proxy) with the header \"X-Forwarded-For: ([^\"]*)\"$", s.auditFleetForged)
	sc.Step(`^the fleet is (running|stopped)$`, s.auditFleetIs)
	sc.Step(`^the CDEvents sink received the audit records, in the journal's order, as dev\.cdeventsx\.flotilla-audit\.recorded\.0\.1\.0 CDEvents:$`, s.auditCDEvents)
}

func (s *scenario) auditWorld() *auditWorld {
	if s.w.audit == nil {
		s.w.audit = &auditWorld{}
	}
	return s.w.audit
}

// send runs a control, noting when.
func (s *scenario) send(name, action, reason string, f func() error) error {
	c := sentControl{name: name, action: action, reason: reason, from: time.Now()}
	if err := f(); err != nil {
		return err
	}
	c.to = time.Now()
	a := s.auditWorld()
	a.sent = append(a.sent, c)
	return nil
}

func (s *scenario) auditPauseResume(ctx context.Context, who, verb, version, reason string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	tok, ok := s.w.approverTokens[who]
	if !ok {
		return fmt.Errorf("no API token named %q: a step must make it", who)
	}
	action := strings.TrimSuffix(verb, "s")
	return s.send(who, action, reason, func() error {
		out, err := s.flotillaCLI(ctx, action, id, "--token", tok, "--reason", reason)
		if err != nil {
			return err
		}
		if !strings.Contains(out, action+" requested by "+who) {
			return fmt.Errorf("flotilla %s printed %q", action, out)
		}
		return nil
	})
}

func (s *scenario) auditApprove(ctx context.Context, who string, wave int, version, reason string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	return s.send(who, "approve", reason, func() error {
		out, err := s.flotillaCLI(ctx, "approve", id, "--wave", fmt.Sprint(wave), "--token", s.w.approverTokens[who], "--reason", reason)
		if err != nil {
			return err
		}
		if !strings.Contains(out, fmt.Sprintf("wave %d approved by %s", wave, who)) {
			return fmt.Errorf("flotilla approve --wave printed %q", out)
		}
		return nil
	})
}

// auditRow is a row of the feature's table, and of `flotilla get audit`'s.
type auditRow struct {
	Name, Action, Application, Wave, Reason, Decision, From string
}

// auditLists runs `flotilla get audit` until it lists the table's rows
// (for up to 30 s: in scale-out mode the replica the CLI reaches may read
// the journal a moment behind), each at the time its control was sent.
func (s *scenario) auditLists(ctx context.Context, table *godog.Table) error {
	var want []auditRow
	for _, r := range table.Rows[1:] {
		c := make([]string, len(r.Cells))
		for i, cell := range r.Cells {
			c[i] = strings.TrimSpace(cell.Value)
		}
		want = append(want, auditRow{c[0], c[1], c[2], c[3], c[4], c[5], c[6]})
	}
	sent := s.auditWorld().sent
	if len(sent) != len(want) {
		return fmt.Errorf("the steps sent %d controls, the table lists %d", len(sent), len(want))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := s.flotillaCLI(ctx, "get", "audit")
		if err != nil {
			return err
		}
		rows, times, err := parseAuditTable(out)
		if err != nil {
			return err
		}
		diff := cmp.Diff(want, rows)
		if diff == "" {
			// Newest first: row i is the control sent len-1-i.
			for i, at := range times {
				c := sent[len(sent)-1-i]
				if at.Before(c.from.Truncate(time.Second)) || at.After(c.to) {
					return fmt.Errorf("%s's %s is listed at %s, sent between %s and %s:\n%s", c.name, c.action,
						at.Format(time.RFC3339), c.from.UTC().Format(time.RFC3339Nano), c.to.UTC().Format(time.RFC3339Nano), out)
				}
			}
			s.w.lastOutput = out
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flotilla get audit (-want +got):\n%s\n%s", diff, out)
		}
		time.Sleep(time.Second)
	}
}

// parseAuditTable reads `flotilla get audit`'s table: each column starts
// where its header does; "-" is empty; WAVE is its number.
func parseAuditTable(out string) ([]auditRow, []time.Time, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "TIME") {
		return nil, nil, fmt.Errorf("flotilla get audit printed no table:\n%s", out)
	}
	header := lines[0]
	names := strings.Fields(header)
	starts := make([]int, len(names))
	for i, n := range names {
		starts[i] = strings.Index(header, n)
	}
	var rows []auditRow
	var times []time.Time
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "no audit records") || strings.HasPrefix(l, "(") {
			continue
		}
		f := map[string]string{}
		for i, n := range names {
			end := len(l)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			v := ""
			if starts[i] < len(l) {
				v = strings.TrimSpace(l[starts[i]:end])
			}
			if v == "-" {
				v = ""
			}
			f[n] = v
		}
		at, err := time.Parse(time.RFC3339, f["TIME"])
		if err != nil {
			return nil, nil, fmt.Errorf("TIME of %q: %w", l, err)
		}
		wave, _, _ := strings.Cut(f["WAVE"], " ")
		rows = append(rows, auditRow{f["NAME"], f["ACTION"], f["APPLICATION"], wave, f["REASON"], f["DECISION"], f["FROM"]})
		times = append(times, at)
	}
	return rows, times, nil
}

// auditJSON checks what -o json adds to the table: the rollout, each
// token's name and how it proved it, the client.
func (s *scenario) auditJSON(ctx context.Context, app, since, version, tokens string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "get", "audit", "--application", app, "--since", since, "-o", "json")
	if err != nil {
		return err
	}
	var page struct {
		Records []struct {
			RolloutID string `json:"rolloutId"`
			Principal struct {
				Name, Token, Via string
			} `json:"principal"`
			UserAgent  string `json:"userAgent"`
			RemoteAddr string `json:"remoteAddr"`
			EventID    string `json:"eventId"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		return fmt.Errorf("decoding flotilla get audit -o json: %w:\n%s", err, out)
	}
	if len(page.Records) != len(s.auditWorld().sent) {
		return fmt.Errorf("flotilla get audit -o json lists %d records, want %d:\n%s", len(page.Records), len(s.auditWorld().sent), out)
	}
	var seen []string
	for _, r := range page.Records {
		if r.RolloutID != id || r.Principal.Via != "token" || r.Principal.Token != r.Principal.Name ||
			!strings.HasPrefix(r.UserAgent, "Go-http-client/") || r.RemoteAddr == "" || r.EventID == "" {
			return fmt.Errorf("a record does not name rollout %s, its token, via token, the CLI's user agent, an address and its control's event:\n%s", id, out)
		}
		if !slices.Contains(seen, r.Principal.Token) {
			seen = append(seen, r.Principal.Token)
		}
	}
	slices.Sort(seen)
	want := strings.Split(tokens, ",")
	slices.Sort(want)
	if diff := cmp.Diff(want, seen); diff != "" {
		return fmt.Errorf("tokens in the audit (-want +got):\n%s", diff)
	}
	return nil
}

// auditTimeline reads the rollout's timeline from the API: each control
// the steps sent has its audit record, right after the control's event
// (journaled in one append), naming who and why.
func (s *scenario) auditTimeline(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var want []string
	for _, c := range s.auditWorld().sent {
		want = append(want, c.name+" "+c.action+" "+c.reason)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var tl struct {
			Events []struct {
				Seq  uint64          `json:"seq"`
				ID   string          `json:"id"`
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"events"`
		}
		if err := s.getJSON(ctx, "/api/v1/rollouts/"+id+"/events", &tl); err != nil {
			return err
		}
		var got []string
		var problems []string
		for i, e := range tl.Events {
			if e.Type != "dev.flotilla.audit.recorded.v1" {
				continue
			}
			var d struct {
				Action, Reason, EventID string
				Principal               struct{ Name string }
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return err
			}
			got = append(got, d.Principal.Name+" "+d.Action+" "+d.Reason)
			if i == 0 || tl.Events[i-1].ID != d.EventID || tl.Events[i-1].Seq != e.Seq-1 {
				problems = append(problems, fmt.Sprintf("the record of %s's %s (seq %d) is not right after its control %s", d.Principal.Name, d.Action, e.Seq, d.EventID))
			}
		}
		diff := cmp.Diff(want, got)
		if diff == "" && len(problems) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the timeline of %s: audit records (-want +got):\n%s%s", id, diff, strings.Join(problems, "\n"))
		}
		time.Sleep(time.Second)
	}
}

// auditUITimeline opens the rollout's page in headless Chromium (logged
// in with the scenario's token) and waits for its timeline to show text
// on an audit record's line.
func (s *scenario) auditUITimeline(ctx context.Context, version, text string) error {
	if s.w.browser == nil {
		if err := s.openUI(ctx); err != nil {
			return err
		}
	}
	b, id, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	cond := fmt.Sprintf(`[...document.querySelectorAll('#timeline li[data-type="audit.recorded"]')].some((li) => li.textContent.includes(%q))`, text)
	return b.until(ctx, uiWait, "the timeline of "+id+" says "+text, cond)
}

// auditTrustedProxy lists addr in server.trustedProxies and puts a
// reverse proxy in front of flotilla that connects to it from addr, adding
// X-Forwarded-For with its client's address, as nginx or an ingress does.
func (s *scenario) auditTrustedProxy(addr string) error {
	if s.w == nil {
		return errors.New("no scenario world: a registry step must come first")
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return fmt.Errorf("%q is not an IP address", addr)
	}
	s.w.trustedProxies = append(s.w.trustedProxies, addr)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(s.w.flotilla.url()) // flotilla starts after this step
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}).DialContext},
	}
	srv := httptest.NewServer(rp)
	s.onCleanup(srv.Close)
	s.auditWorld().proxy = srv
	return nil
}

func (s *scenario) auditStopThroughProxy(ctx context.Context, reason string) error {
	px := s.auditWorld().proxy
	if px == nil {
		return errors.New("no proxy: a step must put one in front of flotilla")
	}
	return s.send("default", "stop-line", reason, func() error {
		// The CLI, with --server the proxy's address.
		cmd := exec.CommandContext(ctx, flotillaBin, "fleet", "stop", "--reason", reason, "--server", px.URL)
		cmd.Env = s.cliEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("flotilla fleet stop through the proxy: %w: %s", err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "fleet: stop requested by default") {
			return fmt.Errorf("flotilla fleet stop printed %q", stdout.String())
		}
		return nil
	})
}

// auditFleetForged sends fleet start or stop as a client that claims
// another address in X-Forwarded-For, straight to flotilla (not through a
// trusted proxy) or through the proxy (which appends the client's own
// address to the header).
func (s *scenario) auditFleetForged(ctx context.Context, verb, via, forged string) error {
	base := s.w.flotilla.url()
	if via == "through the proxy" {
		px := s.auditWorld().proxy
		if px == nil {
			return errors.New("no proxy: a step must put one in front of flotilla")
		}
		base = px.URL
	}
	return s.send("default", "stop-line", "", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/fleet/"+verb, strings.NewReader(`{}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+s.w.apiToken)
		req.Header.Set("X-Forwarded-For", forged)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("POST /api/v1/fleet/%s %s: %s", verb, via, resp.Status)
		}
		return nil
	})
}

// auditFleetIs waits for the line to be running or stopped, as the
// controls left it.
func (s *scenario) auditFleetIs(ctx context.Context, want string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct{ Stopped bool }
		if err := s.getJSON(ctx, "/api/v1/fleet", &st); err != nil {
			return err
		}
		if st.Stopped == (want == "stopped") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet is not %s 30 s after the last control", want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// auditCDEvents reads the audit records the CDEvents sink received (the
// custom events of type cdevents.AuditRecordedType, each once, as a
// consumer drops a resend by id), read back with the SDK, against the
// table's rows in order: who (name and token), the action, how the detail
// begins, the decision.
func (s *scenario) auditCDEvents(ctx context.Context, table *godog.Table) error {
	if s.w.cdSink == nil {
		return errors.New("no CDEvents sink: a step must start one")
	}
	var want [][]string
	for _, r := range table.Rows[1:] {
		var row []string
		for _, c := range r.Cells {
			row = append(row, strings.TrimSpace(c.Value))
		}
		want = append(want, row)
	}
	typ := cdevents.AuditRecordedType.String()
	var got [][]string
	var details []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, details = nil, nil
		seen := map[string]bool{}
		for _, e := range s.w.cdSink.all() {
			if e.Type() != typ || seen[e.ID()] {
				continue
			}
			seen[e.ID()] = true
			ev, err := cdv05.NewFromJsonBytes(e.Data())
			if err != nil {
				return false, fmt.Errorf("event %s (%s) is not a CDEvent: %w", e.ID(), e.Type(), err)
			}
			custom, ok := ev.(*cdv05.CustomTypeEvent)
			if !ok || custom.Context.Type.String() != typ {
				return false, fmt.Errorf("event %s is a %T of context.type %v, want a custom event %s", e.ID(), ev, ev.GetType(), typ)
			}
			var rec events.AuditRecorded
			raw, err := json.Marshal(custom.GetSubjectContent())
			if err == nil {
				err = json.Unmarshal(raw, &rec)
			}
			if err != nil {
				return false, fmt.Errorf("the content of %s: %w", e.ID(), err)
			}
			got = append(got, []string{rec.Principal.Name, rec.Principal.Token, rec.Action, rec.Detail, rec.Decision})
			details = append(details, string(raw))
		}
		return len(got) >= len(want), nil
	})
	if err != nil {
		return fmt.Errorf("the sink received %d audit records, want %d: %w\n%s", len(got), len(want), err, strings.Join(details, "\n"))
	}
	if len(got) != len(want) {
		return fmt.Errorf("the sink received %d audit records, want %d:\n%s", len(got), len(want), strings.Join(details, "\n"))
	}
	for i, w := range want {
		g := got[i]
		if g[0] != w[0] || g[1] != w[1] || g[2] != w[2] || !strings.HasPrefix(g[3], w[3]) || g[4] != w[4] {
			return fmt.Errorf("audit record %d received is %v, want %v (the detail beginning so):\n%s", i+1, g, w, strings.Join(details, "\n"))
		}
	}
	return nil
}
