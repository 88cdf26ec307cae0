package main

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/flotilla-cd/flotilla/events/intake"
)

// request is one delivery the fuzzer posts. It is logged (without its
// credentials) when it gets a 5xx or no answer, and replayed from that log.
type request struct {
	// Receiver is the receiver's name; Sender its type.
	Receiver string `json:"receiver"`
	Sender   string `json:"sender"`
	// Events posts to /events (the first cloudevents receiver) instead of
	// /hooks/<receiver>.
	Events bool        `json:"events,omitempty"`
	Method string      `json:"method,omitempty"` // default POST
	Query  url.Values  `json:"query,omitempty"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
	// Fixture is the events/intake/testdata file the body was made from ("" for
	// random bytes); Mutations says what was done to it.
	Fixture   string   `json:"fixture,omitempty"`
	Mutations []string `json:"mutations,omitempty"`
	// PathToken is the token of /hooks/<receiver>/<token>. Set by signers
	// only, never logged.
	PathToken string `json:"-"`
}

func (r *request) clone() *request {
	c := *r
	c.Query = maps.Clone(r.Query)
	c.Header = r.Header.Clone()
	c.Body = slices.Clone(r.Body)
	c.Mutations = slices.Clone(r.Mutations)
	return &c
}

func (r *request) method() string {
	if r.Method == "" {
		return http.MethodPost
	}
	return r.Method
}

// path is the request's path and query.
func (r *request) path() string {
	p := "/hooks/" + r.Receiver
	if r.PathToken != "" {
		p += "/" + url.PathEscape(r.PathToken)
	}
	if r.Events {
		p = intake.EventsPath
	}
	if len(r.Query) > 0 {
		p += "?" + r.Query.Encode()
	}
	return p
}

// delivery is the request as the intake hands it to a sender (tests).
func (r *request) delivery() *intake.Delivery {
	q := r.Query
	if q == nil {
		q = url.Values{}
	}
	return &intake.Delivery{Receiver: r.Receiver, Header: r.Header.Clone(), Body: r.Body, Query: q, PathToken: r.PathToken}
}

// maxHeaderValue bounds a fuzzed header value: the point is the sender's
// reading of it, not Go's header size limit.
const maxHeaderValue = 8 << 10

// sanitizeHeaders makes every header value one that net/http will send:
// control characters replaced, length bounded. Invalid names are dropped.
func sanitizeHeaders(h http.Header) {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			if len(v) > maxHeaderValue {
				v = v[:maxHeaderValue]
			}
			if !httpguts.ValidHeaderFieldValue(v) {
				v = strings.Map(func(c rune) rune {
					if c < 0x20 && c != '\t' || c == 0x7f {
						return '?'
					}
					return c
				}, v)
			}
			vs[i] = v
		}
	}
}
