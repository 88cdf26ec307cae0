package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// result is what one request got.
type result struct {
	status int // 0: no answer
	body   []byte
	err    error
	// unsent: the fuzzer could not send the request (its own fault, not
	// flotilla's).
	unsent bool
}

// post sends req (signed) to flotilla at base ("http://host:port").
func post(ctx context.Context, client *http.Client, base string, req *request) result {
	hr, err := http.NewRequestWithContext(ctx, req.method(), base+req.path(), bytes.NewReader(req.Body))
	if err != nil {
		return result{err: err, unsent: true}
	}
	hr.Header = req.Header.Clone()
	resp, err := client.Do(hr)
	if err != nil {
		return result{err: err, unsent: isUnsent(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return result{status: resp.StatusCode, body: body}
}

// isUnsent tells the errors of a request net/http refused to send.
func isUnsent(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "invalid header field") || strings.Contains(msg, "invalid method")
}

// column is the summary table's column of r.
func (r result) column() string {
	switch {
	case r.unsent:
		return "unsent"
	case r.status == 0:
		return "no answer"
	}
	return strconv.Itoa(r.status)
}

// Verdicts on a result.
const (
	verdictOK = iota
	// verdictBusy is a 5xx flotilla documents: 503 when the journal could
	// not take the events in time (README: "journal unavailable 503"), or
	// when too many bodies are being read before authentication (the
	// intake's body budget). It is re-checked at the end: a delivery that
	// still gets it on an idle flotilla is refused for good, a failure.
	verdictBusy
	verdictFailure
)

// busyBodies are the bodies of the intake's documented 503s.
var busyBodies = [][]byte{
	[]byte("journaling events failed; retry later"),
	[]byte("too many request bodies being read"),
}

// verdict classifies r: a 5xx other than the documented 503s (a 500
// "sender panicked" included) and a request without an answer are
// failures.
func (r result) verdict() int {
	switch {
	case r.unsent:
		return verdictOK
	case r.status == 0:
		return verdictFailure
	case r.status == http.StatusServiceUnavailable && slices.ContainsFunc(busyBodies, func(b []byte) bool { return bytes.Contains(r.body, b) }):
		return verdictBusy
	case r.status >= 500:
		return verdictFailure
	}
	return verdictOK
}

// requestTimeout bounds one request: flotilla's own write timeout is 30s.
const requestTimeout = 35 * time.Second

func newClient(workers int) *http.Client {
	tr := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}
