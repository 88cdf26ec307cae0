package natsjs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// A consumer's cursor is a key of the <Stream>_cursors bucket: its name in
// unpadded base64url (KV keys take letters, digits, '-', '_', '=', '.' and
// '/'), its value the sequence in decimal.

func cursorKey(consumer string) string { return base64.RawURLEncoding.EncodeToString([]byte(consumer)) }

// Cursor returns the position consumer saved, 0 if none.
func (b *Bus) Cursor(ctx context.Context, consumer string) (uint64, error) {
	e, err := b.cursors.Get(ctx, cursorKey(consumer))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the cursor of %s: %w", consumer, err)
	}
	seq, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the cursor of %s is not a sequence: %w", consumer, err)
	}
	return seq, nil
}

// SetCursor saves consumer's position, replicated before it returns.
func (b *Bus) SetCursor(ctx context.Context, consumer string, seq uint64) error {
	if _, err := b.cursors.Put(ctx, cursorKey(consumer), strconv.AppendUint(nil, seq, 10)); err != nil {
		return fmt.Errorf("saving the cursor of %s: %w", consumer, err)
	}
	return nil
}

// DeleteCursor forgets consumer's position (its key's history purged).
func (b *Bus) DeleteCursor(ctx context.Context, consumer string) error {
	if err := b.cursors.Purge(ctx, cursorKey(consumer)); err != nil {
		return fmt.Errorf("deleting the cursor of %s: %w", consumer, err)
	}
	return nil
}

// CursorNames returns the consumers with a saved cursor whose names start
// with prefix.
func (b *Bus) CursorNames(ctx context.Context, prefix string) ([]string, error) {
	keys, err := b.cursors.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing cursors: %w", err)
	}
	var out []string
	for k := range keys.Keys() {
		name, err := base64.RawURLEncoding.DecodeString(k)
		if err == nil && strings.HasPrefix(string(name), prefix) {
			out = append(out, string(name))
		}
	}
	slices.Sort(out)
	return out, nil
}
