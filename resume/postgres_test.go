package resume

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/storage"
)

// TestImportJSONLPostgresOnce: two hosts (two pgstore pools) importing the
// same JSONL into one session at once store it exactly once, byte for
// byte; the other host's import is skipped, or continues the first's
// without storing a message twice.
func TestImportJSONLPostgresOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	hosts := []storage.Engine{pgopen.Open(t, dsn, schema), pgopen.Open(t, dsn, schema)}
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf(`{"role":"user","content":"line %d",  "timestamp":"2025-01-01T00:00:%02dZ"}`, i, i%60))
	}
	data := strings.Join(lines, "\n") + "\n"
	for round := range 4 {
		session := fmt.Sprintf("s%d", round)
		reps := make([]ImportReport, len(hosts))
		var wg sync.WaitGroup
		for i, h := range hosts {
			wg.Go(func() {
				var err error
				reps[i], err = ImportJSONL(ctx, h, session, strings.NewReader(data), ImportOptions{Source: "legacy.jsonl"})
				if err != nil {
					t.Errorf("round %d host %d: %v", round, i, err)
				}
			})
		}
		wg.Wait()
		if got := reps[0].Imported + reps[1].Imported; got != len(lines) {
			t.Fatalf("round %d: hosts imported %d + %d messages, want %d in all (%+v)", round, reps[0].Imported, reps[1].Imported, len(lines), reps)
		}
		var stored []string
		for e, err := range hosts[1].Messages(ctx, session, 0) {
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, string(e.Raw))
		}
		if strings.Join(stored, "\n") != strings.Join(lines, "\n") {
			t.Fatalf("round %d: %d messages stored, not the source's %d lines byte for byte", round, len(stored), len(lines))
		}
		again, err := ImportJSONL(ctx, hosts[0], session, strings.NewReader(data), ImportOptions{Source: "legacy.jsonl"})
		if err != nil || again.Imported != 0 || again.Skipped == "" {
			t.Fatalf("round %d: a third import: %+v, %v; want skipped", round, again, err)
		}
	}
}
