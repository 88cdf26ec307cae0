package fleettest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Patch is one patch of an object as its cluster's API server recorded it
// in its audit log (localfleet.Cluster.AuditLog).
type Patch struct {
	// Time is when the API server answered.
	Time time.Time
	// FieldManager is the patch's fieldManager; UserAgent the client's.
	FieldManager, UserAgent string
	// Code is the HTTP status the API server answered.
	Code int32
	// Body is the patch as sent.
	Body []byte
}

// Patches reads from a cluster's audit log every completed patch of the
// object resource (plural, e.g. "deployments") namespace/name, oldest
// first. A line the API server is still writing is left for the next read.
func Patches(auditLog, resource, namespace, name string) ([]Patch, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []Patch
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditv1.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // the last line, half written
		}
		r := e.ObjectRef
		if e.Stage != auditv1.StageResponseComplete || e.Verb != "patch" || r == nil ||
			r.Resource != resource || r.Namespace != namespace || r.Name != name || r.Subresource != "" {
			continue
		}
		p := Patch{Time: e.StageTimestamp.Time, UserAgent: e.UserAgent}
		if u, err := url.Parse(e.RequestURI); err == nil {
			p.FieldManager = u.Query().Get("fieldManager")
		}
		if e.ResponseStatus != nil {
			p.Code = e.ResponseStatus.Code
		}
		if e.RequestObject != nil {
			p.Body = e.RequestObject.Raw
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return out, nil
}
