package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
)

// ImportSession refuses metadata that contradicts itself or its entries,
// before writing anything; Append refuses what import refuses.
func TestImportSessionRefusesHostileInput(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "h.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	entry := func(seq, epoch uint64, tokens int) Entry {
		return Entry{Seq: seq, Epoch: epoch, Time: now, Tokens: tokens, Raw: []byte(`{"role":"user","content":"x"}`)}
	}
	one := func(e Entry) []Entry { return []Entry{e} }
	ep := func(epoch, first, last uint64, n int) EpochInfo {
		return EpochInfo{Epoch: epoch, FirstSeq: first, LastSeq: last, Messages: n}
	}
	cases := []struct {
		name    string
		info    SessionInfo
		entries []Entry
	}{
		{"seq 2^64-1", SessionInfo{Epoch: 1, LastSeq: 1<<64 - 1}, one(entry(1<<64-1, 1, 1))},
		{"entry seq 2^64-1", SessionInfo{}, one(entry(1<<64-1, 1, 1))},
		{"epoch after the current", SessionInfo{Epoch: 1, LastSeq: 1, Epochs: []EpochInfo{ep(1, 1, 1, 1), ep(5, 2, 1, 0)}}, one(entry(1, 1, 1))},
		{"entry epoch after the current", SessionInfo{Epoch: 1, LastSeq: 2}, []Entry{entry(1, 1, 1), entry(2, 4, 1)}},
		{"entry after the last seq", SessionInfo{Epoch: 1, LastSeq: 1}, []Entry{entry(1, 1, 1), entry(2, 1, 1)}},
		{"negative epoch count", SessionInfo{Epoch: 1, LastSeq: 1, Epochs: []EpochInfo{ep(1, 1, 1, -3)}}, one(entry(1, 1, 1))},
		{"negative tokens", SessionInfo{}, one(entry(1, 1, -5))},
		{"epochs out of order", SessionInfo{Epoch: 2, LastSeq: 2, Epochs: []EpochInfo{ep(2, 2, 2, 1), ep(1, 1, 1, 1)}}, one(entry(1, 1, 1))},
		{"overlapping epochs", SessionInfo{Epoch: 2, LastSeq: 2, Epochs: []EpochInfo{ep(1, 1, 2, 1), ep(2, 2, 2, 1)}}, one(entry(1, 1, 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.info.Name = "h"
			err := s.ImportSession(ctx, c.info, func(yield func(Entry, error) bool) {
				for _, e := range c.entries {
					if !yield(e, nil) {
						return
					}
				}
			})
			if !errors.Is(err, ErrInvalidImport) {
				t.Fatalf("ImportSession = %v, want ErrInvalidImport", err)
			}
			if _, err := s.Session(ctx, "h"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a refused import left the session: %v", err)
			}
			if rep, err := s.Verify(ctx); err != nil || !rep.Intact() {
				t.Fatalf("verify after a refused import: %v %v", rep, err)
			}
		})
	}
	if _, _, err := s.Append(ctx, "h", Record{Message: ctxstore.NewMessage("user", "x"), Tokens: -1}); !errors.Is(err, ctxstore.ErrInvalidMessage) {
		t.Errorf("Append with negative tokens: %v, want ErrInvalidMessage", err)
	}
	if _, _, err := s.Append(ctx, "bad\xffname", text("user", "x")); err == nil {
		t.Error("Append to a session name that is not UTF-8 succeeded")
	}
}
