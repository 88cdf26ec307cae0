package main

import (
	"encoding/base64"
	"encoding/json"
	"math/rand"
	"net/http"
)

// CloudEvents' media types for structured and batch mode.
const (
	mediaCloudEvent      = "application/cloudevents+json"
	mediaCloudEventBatch = "application/cloudevents-batch+json"
)

// encodeCloudEvents sends a (mutated) cloudevents fixture in one of the modes
// its shape allows: a CDEvent in binary mode as the CDEvents SDKs send it,
// CloudEvents structured, binary or in a batch.
func encodeCloudEvents(r *rand.Rand, req *request) {
	v, err := decodeJSON(req.Body)
	if err != nil {
		// Not JSON (raw mutations): claim some mode anyway.
		switch r.Intn(3) {
		case 0:
			req.Header.Set("Content-Type", mediaCloudEventBatch)
		case 1:
			setBinaryHeaders(r, req.Header)
		}
		return
	}
	if m, ok := v.(map[string]any); ok {
		if ctx, ok := m["context"].(map[string]any); ok && m["specversion"] == nil {
			cdeventBinary(m, ctx, req)
			return
		}
	}
	encodeCloudEventModes(r, req)
}

// encodeCloudEventModes re-encodes a CloudEvent (or a batch) in a random
// mode. A body that is neither is left as it is.
func encodeCloudEventModes(r *rand.Rand, req *request) {
	v, err := decodeJSON(req.Body)
	if err != nil {
		return
	}
	if batch, ok := v.([]any); ok {
		if len(batch) == 0 || r.Intn(3) != 0 {
			req.Header.Set("Content-Type", mediaCloudEventBatch)
			req.Mutations = append(req.Mutations, "batch mode")
			return
		}
		v = batch[r.Intn(len(batch))]
	}
	ev, ok := v.(map[string]any)
	if !ok {
		return
	}
	switch r.Intn(3) {
	case 0:
		req.Header.Set("Content-Type", mediaCloudEvent)
		req.Body, _ = encodeJSON(ev)
		req.Mutations = append(req.Mutations, "structured mode")
	case 1:
		toBinary(ev, req)
		req.Mutations = append(req.Mutations, "binary mode")
	default:
		req.Header.Set("Content-Type", mediaCloudEventBatch)
		req.Body, _ = encodeJSON([]any{ev})
		req.Mutations = append(req.Mutations, "batch mode")
	}
}

// toBinary moves ev's attributes into ce-* headers and its data into the
// body (CloudEvents HTTP binding, binary mode).
func toBinary(ev map[string]any, req *request) {
	ct := "application/json"
	for k, v := range ev {
		switch k {
		case "data", "data_base64":
		case "datacontenttype":
			if s, ok := v.(string); ok {
				ct = s
			}
		default:
			req.Header.Set("Ce-"+k, headerString(v))
		}
	}
	req.Header.Set("Content-Type", ct)
	switch data := ev["data"].(type) {
	case nil:
		req.Body = nil
		if s, ok := ev["data_base64"].(string); ok {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				req.Body = b
			} else {
				req.Body = []byte(s)
			}
		}
	case string:
		req.Body = []byte(data)
	default:
		req.Body, _ = encodeJSON(data)
	}
}

// cdeventBinary sends a CDEvent in binary mode: the CloudEvents attributes
// are copied from its context and subject, the body is the CDEvent.
func cdeventBinary(m, ctx map[string]any, req *request) {
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", headerString(ctx["id"]))
	h.Set("Ce-Source", headerString(ctx["source"]))
	h.Set("Ce-Type", headerString(ctx["type"]))
	if ts, ok := ctx["timestamp"]; ok {
		h.Set("Ce-Time", headerString(ts))
	}
	if subj, ok := m["subject"].(map[string]any); ok {
		h.Set("Ce-Subject", headerString(subj["id"]))
	}
	req.Mutations = append(req.Mutations, "CDEvent binary mode")
}

// setBinaryHeaders claims binary mode for a body of any bytes.
func setBinaryHeaders(r *rand.Rand, h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", uuid(r))
	h.Set("Ce-Source", "/fuzzlive")
	h.Set("Ce-Type", pick(r, "dev.flotilla.image.pushed.v1", "dev.flotilla.git.pushed.v1", "dev.cdevents.artifact.published.0.3.0"))
}

// headerString renders an attribute for a ce-* header: strings as they are,
// anything else as JSON.
func headerString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	}
	b, _ := encodeJSON(v)
	return string(b)
}
