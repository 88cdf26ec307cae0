package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Actions of the audit: the permissions' names (docs/design/identity.md),
// one per control route.
const (
	ActionPause      = "pause"
	ActionResume     = "resume"
	ActionRetry      = "retry"
	ActionRefresh    = "refresh"
	ActionAbort      = "abort"
	ActionApprove    = "approve"
	ActionOverride   = "override"
	ActionRollback   = "rollback"
	ActionQuarantine = "quarantine"
	ActionStopLine   = "stop-line"
)

// actionOf is the action of a control event's type.
var actionOf = map[string]string{
	events.TypeRolloutPauseRequested:      ActionPause,
	events.TypeRolloutResumeRequested:     ActionResume,
	events.TypeRolloutAbortRequested:      ActionAbort,
	events.TypeRolloutOverrideRequested:   ActionOverride,
	events.TypeRolloutRollbackRequested:   ActionRollback,
	events.TypeRolloutRetryRequested:      ActionRetry,
	events.TypeWaveApprovalRequested:      ActionApprove,
	events.TypeVersionQuarantineRequested: ActionQuarantine,
	events.TypeFleetStopRequested:         ActionStopLine,
	events.TypeFleetStartRequested:        ActionStopLine,
}

// AuditLog is the journal GET /api/v1/audit reads back (pkg/store, or
// pkg/bus/natsjs in scale-out: every replica reads the same records).
type AuditLog interface {
	Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error)
	// FirstSeq and LastSeq bound the records kept.
	FirstSeq() uint64
	LastSeq() uint64
}

// WithAuditLog serves GET /api/v1/audit from j.
func (a *API) WithAuditLog(j AuditLog) *API {
	a.auditLog = j
	return a
}

// WithTrustedProxies names the proxies (server.trustedProxies) whose
// X-Forwarded-For an audit record believes: a request from one of them is
// recorded as coming from the header's nearest hop that is not a trusted
// proxy (remoteAddr), any other as coming from its peer.
func (a *API) WithTrustedProxies(p ...netip.Prefix) *API {
	a.proxies = p
	return a
}

// remoteAddr is where r comes from: its peer's address, or, when the peer
// is a trusted proxy, the nearest hop of X-Forwarded-For that is not one.
func (a *API) remoteAddr(r *http.Request) string { return clientAddr(r, a.proxies) }

// clientAddr is where r comes from: its peer's address, or, when the
// peer is one of proxies, the nearest hop of X-Forwarded-For that is not
// one: the header is read from its end, as each proxy appends the address
// it was reached from, so a client's own (forged) X-Forwarded-For, which
// comes first, is never believed. Every hop a proxy: the first.
func clientAddr(r *http.Request, proxies []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !trusted(host, proxies) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if i == 0 || !trusted(hops[i], proxies) {
			return hops[i]
		}
	}
	return host
}

// trusted says whether addr is one of proxies.
func trusted(addr string, proxies []netip.Prefix) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
}

// auditOf is the audit record of r's control: who sent it (the principal
// in r's context), from where, with which client.
func (a *API) auditOf(r *http.Request, action string, rec events.AuditRecorded) events.AuditRecorded {
	rec.Action = action
	if p, ok := identity.FromContext(r.Context()); ok {
		rec.Principal = events.AuditPrincipal{Subject: p.Subject, Name: p.Name, Username: p.Username, Groups: p.Groups, Token: p.Token,
			Automation: p.Automation, Via: string(p.Via)}
	}
	rec.RemoteAddr = a.remoteAddr(r)
	rec.UserAgent = r.UserAgent()
	if rec.Decision == "" {
		rec.Decision = events.AuditAllowed
	}
	return rec
}

// auditEvent is the event of rec, about control event controlID ("" when
// none): its id follows the control's, so a retried append is
// de-duplicated with it.
func auditEvent(rec events.AuditRecorded, controlID string) (cloudevents.Event, error) {
	id := controlID + "/audit"
	if controlID == "" {
		id = fmt.Sprintf("audit/%s/%s/%s/%s/%d", rec.Decision, rec.Action, rec.Application, rec.RolloutID, time.Now().UnixNano())
	}
	rec.EventID = controlID
	e, err := events.New(id, "/flotilla/api", events.TypeAuditRecorded, rec)
	if err != nil {
		return e, err
	}
	if rec.RolloutID != "" {
		e.SetExtension(events.ExtRolloutID, rec.RolloutID)
	}
	return e, nil
}

// audit journals rec, a decision on a control that journals no event of
// its own (an approval of a cluster, a refresh). A control is not done
// unaudited: on a failure it answers the error itself and reports false.
func (a *API) audit(w http.ResponseWriter, r *http.Request, rec events.AuditRecorded) bool {
	e, err := auditEvent(rec, "")
	if err == nil {
		_, err = a.journal.Append(r.Context(), e)
	}
	if err != nil {
		writeError(w, fmt.Errorf("journaling the audit record of %s: %w", rec.Action, err))
		return false
	}
	return true
}

// auditRefused journals that r's control (action, a permission's name) on
// application (and its rollout rolloutID, both "" for the fleet's) was
// refused, and why; the wave, where the route names one, is r's. Call it
// before answering the refusal. A journal that fails is logged: the
// refusal stands either way.
func (a *API) auditRefused(r *http.Request, action, application, rolloutID, why string) {
	a.auditRefusal(r, action, pathWave(r, events.AuditRecorded{Application: application, RolloutID: rolloutID}), why)
}

// pathWave is rec with the wave r's route names, if any (by number or
// name).
func pathWave(r *http.Request, rec events.AuditRecorded) events.AuditRecorded {
	if wv := r.PathValue("wave"); wv != "" {
		if n, err := strconv.Atoi(wv); err == nil {
			rec.WaveNumber = n
		} else {
			rec.WaveName = wv
		}
	}
	return rec
}

// auditRefusal journals rec (what r's control was about) as refused, and
// why, as auditRefused does.
func (a *API) auditRefusal(r *http.Request, action string, rec events.AuditRecorded, why string) {
	rec.Decision, rec.Why = events.AuditRefused, why
	rec = a.auditOf(r, action, rec)
	e, err := auditEvent(rec, "")
	if err == nil {
		_, err = a.journal.Append(r.Context(), e)
	}
	if err != nil {
		a.log.ErrorContext(r.Context(), "journaling a refused control's audit record", "action", action, "application", rec.Application,
			"rollout_id", rec.RolloutID, "by", rec.Principal.Name, "error", err)
	}
}

// Bounds of GET /api/v1/audit.
const (
	// DefaultAuditLimit and MaxAuditLimit bound the records answered.
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
	// maxAuditScan is how many journal records one answer reads at most.
	maxAuditScan = 200_000
	// auditChunk is how many records are read at once, newest first.
	auditChunk = 1000
	// auditSlack is how far before ?since= the journal is read: events
	// are stamped by their sender's clock, in journal order but for skew.
	auditSlack = time.Minute
)

// AuditEntry is an audit record as GET /api/v1/audit answers it: the
// journal's position, the event's id and time, and its payload.
type AuditEntry struct {
	Seq  uint64    `json:"seq"`
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	events.AuditRecorded
}

// AuditPage answers GET /api/v1/audit: records newest first.
type AuditPage struct {
	Records []AuditEntry `json:"records"`
	// Truncated: the answer stopped at the most the API reads at once
	// (older records may match), or the journal's retention removed the
	// older records.
	Truncated bool `json:"truncated,omitempty"`
}

// AuditQuery is what GET /api/v1/audit asks for.
type AuditQuery struct {
	Application string
	RolloutID   string
	Since       time.Time // zero: every record kept
	Limit       int
}

// ParseAuditQuery reads GET /api/v1/audit's query: application, rollout,
// since (a duration back from now, such as 1h, or an RFC 3339 time) and
// limit (1 to MaxAuditLimit, DefaultAuditLimit when absent). Anything else,
// or a bad value, is a permanent error saying which.
func ParseAuditQuery(q map[string][]string, now time.Time) (AuditQuery, error) {
	out := AuditQuery{Limit: DefaultAuditLimit}
	for k, vs := range q {
		v := ""
		if len(vs) > 0 {
			v = vs[len(vs)-1]
		}
		switch k {
		case "application":
			out.Application = v
		case "rollout":
			out.RolloutID = v
		case "since":
			if v == "" {
				continue
			}
			if d, err := time.ParseDuration(v); err == nil {
				if d < 0 {
					return out, fault.Permanent(fmt.Errorf("since: want a duration back from now (such as 1h) or an RFC 3339 time, got %q (negative)", v))
				}
				out.Since = now.Add(-d)
				continue
			}
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return out, fault.Permanent(fmt.Errorf("since: want a duration back from now (such as 1h) or an RFC 3339 time, got %q", v))
			}
			out.Since = t
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxAuditLimit {
				return out, fault.Permanent(fmt.Errorf("limit: want a number from 1 to %d, got %q", MaxAuditLimit, v))
			}
			out.Limit = n
		default:
			return out, fault.Permanent(fmt.Errorf("unknown parameter %q: the audit takes application, rollout, since and limit", k))
		}
	}
	return out, nil
}

// listAudit answers the audit records, newest first (AuditQuery).
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) {
	if a.auditLog == nil {
		writeError(w, fault.New(fault.ErrNotFound, "the audit is not enabled"))
		return
	}
	q, err := ParseAuditQuery(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := ReadAudit(r.Context(), a.auditLog, q)
	if err != nil {
		writeError(w, fmt.Errorf("reading the audit: %w", err))
		return
	}
	page.Records = a.readableAudit(r.Context(), page.Records) // another project's: left out
	writeJSON(w, http.StatusOK, page)
}

// ReadAudit reads the audit records q asks for back from j, newest first.
func ReadAudit(ctx context.Context, j AuditLog, q AuditQuery) (AuditPage, error) {
	out := AuditPage{Records: []AuditEntry{}}
	if q.Limit <= 0 {
		q.Limit = DefaultAuditLimit
	}
	first, hi := max(j.FirstSeq(), 1), j.LastSeq()
	scanned := 0
	for hi >= first && len(out.Records) < q.Limit {
		if scanned >= maxAuditScan {
			out.Truncated = true
			return out, nil
		}
		lo := first
		if hi-first >= auditChunk {
			lo = hi - auditChunk + 1
		}
		recs, err := j.Read(ctx, lo-1, int(hi-lo+1))
		if err != nil {
			return out, err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			rec := recs[i]
			if rec.Seq > hi || rec.Seq < lo {
				continue
			}
			scanned++
			if rec.Err != nil {
				continue
			}
			t := rec.Event.Time()
			if !q.Since.IsZero() && t.Before(q.Since.Add(-auditSlack)) {
				return out, nil
			}
			if rec.Event.Type() != events.TypeAuditRecorded || !q.Since.IsZero() && t.Before(q.Since) {
				continue
			}
			p, err := events.Decode[events.AuditRecorded](rec.Event)
			if err != nil ||
				q.Application != "" && p.Application != q.Application ||
				q.RolloutID != "" && p.RolloutID != q.RolloutID {
				continue
			}
			out.Records = append(out.Records, AuditEntry{Seq: rec.Seq, ID: rec.Event.ID(), Time: t, AuditRecorded: p})
			if len(out.Records) == q.Limit {
				return out, nil
			}
		}
		hi = lo - 1
	}
	if hi < first && first > 1 {
		out.Truncated = true // retention removed what came before
	}
	return out, nil
}
