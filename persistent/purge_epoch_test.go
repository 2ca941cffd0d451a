package persistent

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgtest"
	"github.com/ctxstore/ctxstore/internal/pgtest/pgopen"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
)

// purgeEngine is an engine for the epoch purge tests: the string a
// manager opens, a handle of the test's own, and where the backing store
// still holds a marker's bytes (files under the directory; rows).
type purgeEngine struct {
	db    string
	eng   storage.Engine
	leaks func(t *testing.T, marker string) []string
}

func purgeEngines() map[string]func(t *testing.T) purgeEngine {
	return map[string]func(t *testing.T) purgeEngine{
		"bbolt": func(t *testing.T) purgeEngine {
			path := dbPath(t)
			return purgeEngine{path, otherStore(t, path), func(t *testing.T, marker string) (where []string) {
				err := filepath.WalkDir(filepath.Dir(path), func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					b, err := os.ReadFile(p)
					if err == nil && bytes.Contains(b, []byte(marker)) {
						where = append(where, p)
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return where
			}}
		},
		"postgres": func(t *testing.T) purgeEngine {
			dsn := pgtest.DSN(t)
			schema := pgtest.Schema(t, dsn)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return purgeEngine{dsn + sep + "schema=" + schema, pgopen.Open(t, dsn, schema), func(t *testing.T, marker string) (where []string) {
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				s := pgx.Identifier{schema}.Sanitize()
				for _, table := range []string{"messages", "derived", "search_docs", "sessions"} {
					var n int
					q := `SELECT count(*) FROM ` + s + `.` + table + ` t WHERE strpos(lower(t::text), lower($1)) > 0 OR strpos(t::text, encode(convert_to($1, 'UTF8'), 'hex')) > 0`
					if err := conn.QueryRow(ctx, q, marker).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n > 0 {
						where = append(where, table)
					}
				}
				return where
			}}
		},
	}
}

// A manager's summary of a marker said in epoch 1 is saved in its view
// decisions; after epoch 1 goes (a purge of it, after a Clear or a rewind
// to before the marker, or gc's --keep-epochs) with persistent's rules and
// a scrub, no file under the directory (bbolt) or row (PostgreSQL) holds
// the marker, and the later epoch's decisions stay.
func TestPurgeEpochDropsSummaries(t *testing.T) {
	const marker = "bilbySECRET6021"
	ends := map[string]func(t *testing.T, m *Manager, pe purgeEngine){
		"clear": func(t *testing.T, m *Manager, pe purgeEngine) {
			if err := m.Clear(context.Background()); err != nil {
				t.Fatal(err)
			}
		},
		"rewind": func(t *testing.T, m *Manager, pe purgeEngine) {
			if _, err := storage.Rewind(context.Background(), pe.eng, "s", 1); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, open := range purgeEngines() {
		for how, end := range ends {
			for _, purge := range []string{"purge", "gc"} {
				t.Run(name+"/"+how+"/"+purge, func(t *testing.T) {
					pe := open(t)
					purgeEpochAfter(t, pe, marker, end, purge == "gc")
				})
			}
		}
	}
}

// purgeEpochAfter is TestPurgeEpochDropsSummaries on one engine: epoch 1
// ended by end, purged by storage.PurgeEpoch or (gc) storage.GC.
func purgeEpochAfter(t *testing.T, pe purgeEngine, marker string, end func(*testing.T, *Manager, purgeEngine), gc bool) {
	ctx := context.Background()
	cfg := Config{Config: simple.Config{Strategy: "summarize",
		Summarizer: func(_ context.Context, msgs []ctxstore.Message) (string, error) {
			return echoSummary(marker, msgs), nil
		}}}
	m, err := Open(pe.db, "s", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	request := func() {
		t.Helper()
		if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000}); err != nil {
			t.Fatal(err)
		}
	}
	addAll(t, m, append([]ctxstore.Message{user("a start"), user("my key is " + marker)}, conversation(60, 400)...))
	request()
	views := func() (holding int, keys []string) {
		for d, err := range pe.eng.ListDerived(ctx, "s", KindView) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, d.Key)
			if bytes.Contains(d.Value, []byte(marker)) {
				holding++
			}
		}
		return holding, keys
	}
	if n, _ := views(); n == 0 {
		t.Fatal("no saved view decision holds the summary of the marker: the test shows nothing")
	}
	end(t, m, pe)
	time.Sleep(300 * time.Millisecond) // epoch 1 ends before gc's cutoff
	addAll(t, m, conversation(60, 400))
	request()
	if gc {
		info, err := pe.eng.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		pol := storage.Retention{OlderThan: 100 * time.Millisecond, KeepEpochs: 1, EpochDrops: EpochDrops(), Now: info.Updated.Add(time.Millisecond)}
		rep, err := storage.GC(ctx, pe.eng, pol)
		if err != nil || len(rep.Epochs) != 1 || rep.Epochs[0].Epoch != 1 {
			t.Fatalf("gc: %+v %v, want epoch 1 purged", rep, err)
		}
	} else {
		if err := storage.PurgeEpoch(ctx, pe.eng, "s", 1, EpochDrops()); err != nil {
			t.Fatal(err)
		}
		if _, err := storage.Scrub(ctx, pe.eng); err != nil {
			t.Fatal(err)
		}
	}
	n, keys := views()
	if n != 0 || len(keys) == 0 || !strings.HasPrefix(keys[0], epochViews(2)) {
		t.Fatalf("after the purge %d view records hold the marker; keys %v, want epoch 2's only", n, keys)
	}
	if where := pe.leaks(t, marker); len(where) > 0 {
		t.Fatalf("the marker is still in %v after the purge and the scrub", where)
	}
	request() // the manager goes on over epoch 2
}
