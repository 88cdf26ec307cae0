package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/logctx"
)

// logged is what one JSON line says.
func logged(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%s: %v", buf, err)
	}
	buf.Reset()
	delete(m, "time")
	delete(m, "level")
	return m
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := logctx.Wrap(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx := logctx.With(t.Context(), logctx.RolloutID, "r1", "function", "advance", "empty", "")
	tests := []struct {
		name string
		log  func()
		want map[string]any
	}{{
		name: "ctx's attributes are added",
		log:  func() { log.InfoContext(ctx, "m", "cluster", "c1") },
		want: map[string]any{"msg": "m", "cluster": "c1", "rollout_id": "r1", "function": "advance"},
	}, {
		name: "the line's own value wins",
		log:  func() { log.InfoContext(ctx, "m", "function", "rollback") },
		want: map[string]any{"msg": "m", "rollout_id": "r1", "function": "rollback"},
	}, {
		name: "the logger's own value wins",
		log:  func() { log.With("function", "plan").InfoContext(ctx, "m") },
		want: map[string]any{"msg": "m", "rollout_id": "r1", "function": "plan"},
	}, {
		name: "a later With replaces a key",
		log:  func() { log.InfoContext(logctx.With(ctx, logctx.RolloutID, "r2"), "m") },
		want: map[string]any{"msg": "m", "rollout_id": "r2", "function": "advance"},
	}, {
		name: "no ctx attributes",
		log:  func() { log.InfoContext(context.Background(), "m") },
		want: map[string]any{"msg": "m"},
	}, {
		name: "From: the ctx's logger",
		log:  func() { logctx.From(logctx.WithLogger(ctx, log)).InfoContext(ctx, "m") },
		want: map[string]any{"msg": "m", "rollout_id": "r1", "function": "advance"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.log()
			if diff := cmp.Diff(tt.want, logged(t, &buf)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if logctx.Wrap(log) != log {
		t.Error("Wrap wrapped a wrapped logger again")
	}
	logctx.From(context.Background()).Info("discarded")
	if buf.Len() != 0 {
		t.Errorf("From without a logger logged %s", buf.String())
	}
}
