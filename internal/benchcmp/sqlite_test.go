package benchcmp

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	_ "modernc.org/sqlite"
)

// The OpenAI Agents SDK's SQLiteSession schema: a row per session, a row
// per message (the item's JSON as text), an index by session.
const agentsSchema = `
CREATE TABLE IF NOT EXISTS agent_sessions (
    session_id TEXT PRIMARY KEY,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS agent_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message_data TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS idx_agent_messages_session_id ON agent_messages (session_id, created_at);
`

// sessionCount is the number of sessions of the side-by-side benchmark:
// CTXSTORE_BENCH_SESSIONS, 10,000 by default (the figure is for
// 100,000: a file of the format 2 layout is then about 1.7 GB).
func sessionCount(b *testing.B) int {
	n := 10_000
	if v := os.Getenv("CTXSTORE_BENCH_SESSIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("CTXSTORE_BENCH_SESSIONS=%q: want a positive number", v)
		}
	}
	return n
}

// loadSQLite inserts sessions into a new SQLite file at path in one
// transaction, as the SDK's add_items does per session, with SQLite's
// default durability (rollback journal, synchronous FULL).
func loadSQLite(b *testing.B, path string, sessions []storage.SessionImport) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(agentsSchema); err != nil {
		b.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	insS, err := tx.Prepare(`INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)`)
	if err != nil {
		b.Fatal(err)
	}
	insM, err := tx.Prepare(`INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	for _, si := range sessions {
		if _, err := insS.Exec(si.Info.Name); err != nil {
			b.Fatal(err)
		}
		for _, e := range si.Entries {
			if _, err := insM.Exec(si.Info.Name, string(e.Raw)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// loadStore imports sessions into a new store file at path in batches of
// 1,000, as `ctxstore import` does.
func loadStore(b *testing.B, path string, sessions []storage.SessionImport) {
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for batch := range slices.Chunk(sessions, 1000) {
		if err := st.ImportSessions(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

func fileSize(b *testing.B, paths ...string) int64 {
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err == nil {
			n += fi.Size()
		}
	}
	return n
}

// BenchmarkManySessions: N sessions of two short messages
// (CTXSTORE_BENCH_SESSIONS), in ctxstore's bbolt file and in SQLite with
// the OpenAI Agents SDK's schema, in one run: file bytes, bulk import
// time, listing every session (time, and the peak resident memory of a
// process that does only that), and opening one session (its metadata and
// last 50 messages against the SDK's get_items query), p50 over 200
// random sessions.
func BenchmarkManySessions(b *testing.B) {
	n := sessionCount(b)
	sessions := storagetest.SmallSessions(n)
	for b.Loop() {
		dir := b.TempDir()
		ours, theirs := filepath.Join(dir, "ctxstore.db"), filepath.Join(dir, "agents.sqlite")
		t0 := time.Now()
		loadStore(b, ours, sessions)
		importOurs := time.Since(t0)
		t0 = time.Now()
		loadSQLite(b, theirs, sessions)
		importTheirs := time.Since(t0)
		sizeOurs, sizeTheirs := fileSize(b, ours, boltstore.LogPath(ours)), fileSize(b, theirs, theirs+"-journal", theirs+"-wal")

		listOurs, rssOurs := child(b, "list-store", ours)
		listTheirs, rssTheirs := child(b, "list-sqlite", theirs)
		openOurs, openTheirs := openOne(b, ours, theirs, sessions)

		b.ReportMetric(float64(sizeOurs)/float64(n), "ctxstore-bytes/session")
		b.ReportMetric(float64(sizeTheirs)/float64(n), "sqlite-bytes/session")
		b.ReportMetric(float64(sizeOurs)/float64(sizeTheirs), "size-ratio")
		b.ReportMetric(importOurs.Seconds(), "ctxstore-import-s")
		b.ReportMetric(importTheirs.Seconds(), "sqlite-import-s")
		b.ReportMetric(importOurs.Seconds()/importTheirs.Seconds(), "import-ratio")
		b.ReportMetric(float64(listOurs.Milliseconds()), "ctxstore-list-ms")
		b.ReportMetric(float64(listTheirs.Milliseconds()), "sqlite-list-ms")
		b.ReportMetric(float64(rssOurs)/(1<<20), "ctxstore-list-maxrss-MiB")
		b.ReportMetric(float64(rssTheirs)/(1<<20), "sqlite-list-maxrss-MiB")
		b.ReportMetric(float64(openOurs.Microseconds()), "ctxstore-open-one-p50-µs")
		b.ReportMetric(float64(openTheirs.Microseconds()), "sqlite-open-one-p50-µs")
	}
}

// openOne is the p50 of opening one random session, both ways.
func openOne(b *testing.B, ours, theirs string, sessions []storage.SessionImport) (time.Duration, time.Duration) {
	ctx := context.Background()
	st, err := boltstore.Open(ours, boltstore.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	db, err := sql.Open("sqlite", theirs)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	get, err := db.Prepare(`SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY created_at DESC LIMIT 50`)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var a, t []time.Duration
	for range 200 {
		name := sessions[r.IntN(len(sessions))].Info.Name
		t0 := time.Now()
		if _, err := st.Session(ctx, name); err != nil {
			b.Fatal(err)
		}
		if es, err := st.Tail(ctx, name, 50); err != nil || len(es) == 0 {
			b.Fatalf("tail %s: %d, %v", name, len(es), err)
		}
		t1 := time.Now()
		rows, err := get.Query(name)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for rows.Next() {
			var s string
			rows.Scan(&s)
			got++
		}
		rows.Close()
		if got == 0 {
			b.Fatalf("sqlite: no messages of %s", name)
		}
		a, t = append(a, t1.Sub(t0)), append(t, time.Since(t1))
	}
	slices.Sort(a)
	slices.Sort(t)
	return a[len(a)/2], t[len(t)/2]
}

// child runs this test binary again to list every session of path (what
// says how: list-store, list-sqlite) and nothing else, and returns how long
// the listing took and the process's peak resident memory.
func child(b *testing.B, what, path string) (time.Duration, int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), "BENCHCMP_CHILD="+what, "BENCHCMP_PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", what, err, out)
	}
	var ns, hwm int64
	var count int
	if _, err := fmt.Sscanf(string(out), "listed %d in %d, peak resident %d", &count, &ns, &hwm); err != nil {
		b.Fatalf("%s: %q", what, out)
	}
	return time.Duration(ns), hwm
}

// peakResident is this process's peak resident memory in bytes (VmHWM).
// The rusage of a child is no measure of it: Linux keeps the maximum
// across execve, so a child started by a large parent reports the
// parent's.
func peakResident() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if kb, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return n * 1024
		}
	}
	return 0
}

// TestChild is the child of child; it does nothing in a plain test run.
func TestChild(t *testing.T) {
	what, path := os.Getenv("BENCHCMP_CHILD"), os.Getenv("BENCHCMP_PATH")
	if what == "" {
		t.Skip("run by BenchmarkManySessions")
	}
	ctx := context.Background()
	t0 := time.Now()
	count := 0
	switch what {
	case "list-store":
		st, err := boltstore.Open(path, boltstore.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		// As ctxstore ls reads them: a stream, a page at a time.
		for _, err := range storage.ListSessions(ctx, st, storage.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			count++
		}
		st.Close()
	case "list-sqlite":
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(`SELECT session_id, created_at, updated_at FROM agent_sessions ORDER BY session_id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, c, u string
			if err := rows.Scan(&id, &c, &u); err != nil {
				t.Fatal(err)
			}
			count++
		}
		rows.Close()
		db.Close()
	}
	took := time.Since(t0)
	fmt.Printf("listed %d in %d, peak resident %d\n", count, took.Nanoseconds(), peakResident())
}
