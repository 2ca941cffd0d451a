package resume

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/storage"
	_ "github.com/ctxstore/ctxstore/storage/pgstore" // postgres:// DBPaths
)

// TestIngestJSONLPostgresOnce: two hosts (two pgstore pools) importing the
// same JSONL into one session at once store it exactly once, byte for
// byte; the other host's import is skipped, or continues the first's
// without storing a message twice.
func TestIngestJSONLPostgresOnce(t *testing.T) {
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
		reps := make([]IngestReport, len(hosts))
		var wg sync.WaitGroup
		for i, h := range hosts {
			wg.Go(func() {
				var err error
				reps[i], err = IngestJSONL(ctx, h, session, strings.NewReader(data), IngestOptions{Source: "legacy.jsonl"})
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
		again, err := IngestJSONL(ctx, hosts[0], session, strings.NewReader(data), IngestOptions{Source: "legacy.jsonl"})
		if err != nil || again.Imported != 0 || again.Skipped == "" {
			t.Fatalf("round %d: a third import: %+v, %v; want skipped", round, again, err)
		}
	}
}

// TestOpenOnPostgres: a postgres:// DBPath resumes through the PostgreSQL
// engine (storage.Open picks it by the URL's scheme): the JSONL is imported
// there once, nothing is created beside the session's files, the session is
// found there by id alone, and a second Open resumes without importing.
func TestOpenOnPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", pgtest.Schema(t, dsn))
	u.RawQuery = q.Encode()
	db := u.String()
	root := fakeHome(t)

	m, rep := openSession(t, Options{Path: jsonlPath(root, idNotes), DBPath: db})
	if rep.Session != idNotes || rep.DBPath != db || rep.Migrated != 4 {
		t.Fatalf("first open on PostgreSQL: %+v", rep)
	}
	first := history(t, m)
	m.Close()
	if _, err := os.Stat(filepath.Join(filepath.Dir(jsonlPath(root, idNotes)), DBName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file database beside the session with a postgres:// DBPath: %v", err)
	}
	m2, rep2 := openSession(t, Options{Root: root, Session: idNotes, DBPath: db})
	if !rep2.Resumed || rep2.Migrated != 0 || !equalBytes(history(t, m2), first) {
		t.Fatalf("second open on PostgreSQL: %+v, history %d messages, want %d resumed", rep2, len(history(t, m2)), len(first))
	}
	st := pgopen.Open(t, dsn, q.Get("schema"))
	if info, err := st.Session(ctx, idNotes); err != nil || info.LastSeq != uint64(len(first)) {
		t.Fatalf("session in PostgreSQL: %+v, %v", info, err)
	}
}
