package pgstore

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkAppend: a durable Append of one ~1 KiB message against a bare
// INSERT+COMMIT of the same bytes through pgx on the same server, taken
// alternately in one run; reports both p50s and their ratio.
func BenchmarkAppend(b *testing.B) {
	dsn := testDSN(b)
	st := openTest(b, dsn, freshSchema(b, dsn))
	ctx := context.Background()
	if _, err := st.pool.Exec(ctx, "CREATE TABLE "+st.schema+".bare (session bytea, seq bigserial, raw bytea, PRIMARY KEY (session, seq))"); err != nil {
		b.Fatal(err)
	}
	msg := ctxstore.NewMessage("user", strings.Repeat("lorem ipsum ", 85))
	rec := storage.Record{Message: msg, Tokens: 250}
	raw := msg.Bytes()
	bare := func() error {
		tx, err := st.pool.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+st.schema+".bare (session, raw) VALUES ($1, $2)", []byte("s"), raw); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	// Warm both paths (prepared statements, connections).
	for range 20 {
		if _, _, err := st.Append(ctx, "s", rec); err != nil {
			b.Fatal(err)
		}
		if err := bare(); err != nil {
			b.Fatal(err)
		}
	}
	var ours, theirs []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := st.Append(ctx, "s", rec); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		ours, theirs = append(ours, t1.Sub(t0)), append(theirs, time.Since(t1))
	}
	a, r := p50(ours), p50(theirs)
	b.ReportMetric(float64(a.Microseconds()), "append-p50-µs")
	b.ReportMetric(float64(r.Microseconds()), "bare-insert-commit-p50-µs")
	b.ReportMetric(float64(a)/float64(r), "ratio")
}

// BenchmarkReadAfterAppend: what a request after an append reads (the
// session's metadata and its last 50 messages) in a session of 1k and of
// 100k messages, in one run; reports both p50s and their ratio.
func BenchmarkReadAfterAppend(b *testing.B) {
	dsn := testDSN(b)
	st := openTest(b, dsn, freshSchema(b, dsn))
	ctx := context.Background()
	fill := func(session string, n int) {
		entries := func(yield func(storage.Entry, error) bool) {
			for i := 1; i <= n; i++ {
				raw := fmt.Appendf(nil, `{"role":"user","content":"message %d of a long session, about two hundred bytes of text so that the table holds something like real traffic, not empty rows"}`, i)
				if !yield(storage.Entry{Seq: uint64(i), Epoch: 1, Time: time.Now(), Tokens: 40, Raw: raw}, nil) {
					return
				}
			}
		}
		if err := st.ImportSession(ctx, storage.SessionInfo{Name: session}, entries); err != nil {
			b.Fatal(err)
		}
	}
	fill("small", 1_000)
	fill("large", 100_000)
	if _, err := st.pool.Exec(ctx, "ANALYZE "+st.schema+".messages"); err != nil {
		b.Fatal(err)
	}
	rec := storage.Record{Message: ctxstore.NewMessage("user", "one more"), Tokens: 3}
	read := func(session string) (time.Duration, error) {
		if _, _, err := st.Append(ctx, session, rec); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if _, err := st.Session(ctx, session); err != nil {
			return 0, err
		}
		tail, err := st.Tail(ctx, session, 50)
		if err == nil && len(tail) != 50 {
			err = fmt.Errorf("tail of %d", len(tail))
		}
		return time.Since(t0), err
	}
	var small, large []time.Duration
	b.ResetTimer()
	for b.Loop() {
		d1, err := read("small")
		if err != nil {
			b.Fatal(err)
		}
		d2, err := read("large")
		if err != nil {
			b.Fatal(err)
		}
		small, large = append(small, d1), append(large, d2)
	}
	s, l := p50(small), p50(large)
	b.ReportMetric(float64(s.Microseconds()), "1k-p50-µs")
	b.ReportMetric(float64(l.Microseconds()), "100k-p50-µs")
	b.ReportMetric(float64(l)/float64(s), "ratio")
}

// appendLoop appends n ~1 KiB messages to session, one per call.
func appendLoop(st *Store, session string, n int) error {
	rec := storage.Record{Message: ctxstore.NewMessage("user", strings.Repeat("lorem ipsum ", 85)), Tokens: 250}
	for range n {
		if _, _, err := st.Append(context.Background(), session, rec); err != nil {
			return err
		}
	}
	return nil
}

// bareLoop inserts n rows of the same ~1 KiB into the bench's bare table,
// one INSERT per transaction (one round trip, synchronous commit): what the
// server and the machine allow one appender without ctxstore.
func bareLoop(st *Store, session string, n int) error {
	raw := ctxstore.NewMessage("user", strings.Repeat("lorem ipsum ", 85)).Bytes()
	for range n {
		if _, err := st.pool.Exec(context.Background(), "INSERT INTO "+st.schema+".bare (session, raw) VALUES ($1, $2)", []byte(session), raw); err != nil {
			return err
		}
	}
	return nil
}

// childAppenders runs g goroutines appending n messages each to sessions
// of their own (or inserting bare rows, mode "bare"), starting at the given
// Unix time (ns), and prints "done <Unix ns>" when all are.
func childAppenders(st *Store, arg string) error {
	var g, n int
	var start int64
	var prefix, mode string
	if _, err := fmt.Sscan(arg, &g, &n, &start, &prefix, &mode); err != nil {
		return fmt.Errorf("arg %q: %w", arg, err)
	}
	loop := appendLoop
	if mode == "bare" {
		loop = bareLoop
	}
	if err := loop(st, prefix+"-warm", 3); err != nil {
		return err
	}
	time.Sleep(time.Until(time.Unix(0, start)))
	errs := make(chan error, g)
	for i := range g {
		go func() { errs <- loop(st, fmt.Sprintf("%s-%d", prefix, i), n) }()
	}
	for range g {
		if err := <-errs; err != nil {
			return err
		}
	}
	fmt.Printf("done %d\n", time.Now().UnixNano())
	return nil
}

// BenchmarkAppendersAcrossProcesses: appends per second of one appender
// against 16 appenders in 4 processes (4 goroutines each, own pool per
// process, a session per appender), in one run; reports the ratio. The same
// two phases with bare one-row INSERTs (one transaction each) give the
// ratio the server and the machine allow without ctxstore ("bare-ratio").
// b.N is the appends of each appender.
func BenchmarkAppendersAcrossProcesses(b *testing.B) {
	dsn := testDSN(b)
	schema := freshSchema(b, dsn)
	st := openTest(b, dsn, schema)
	if _, err := st.pool.Exec(context.Background(), "CREATE TABLE "+st.schema+".bare (session bytea, seq bigserial, raw bytea, PRIMARY KEY (session, seq))"); err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 50)
	ratio := func(mode string) (one, many float64) {
		loop := appendLoop
		if mode == "bare" {
			loop = bareLoop
		}
		if err := loop(st, mode+"-warm", 10); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := loop(st, mode+"-alone", n); err != nil {
			b.Fatal(err)
		}
		one = float64(n) / time.Since(t0).Seconds()

		const procs, per = 4, 4
		start := time.Now().Add(3 * time.Second)
		var cmds []*exec.Cmd
		var outs []io.Reader
		for p := range procs {
			cmd := child(b, "appenders", dsn, schema, fmt.Sprintf("%d %d %d %s-p%d %s", per, n, start.UnixNano(), mode, p, mode))
			_, out := testkit.Start(b, cmd) // the appenders read no stdin
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		var end int64
		for i, cmd := range cmds {
			var done int64
			line, _ := io.ReadAll(outs[i])
			if _, err := fmt.Sscanf(string(line), "done %d", &done); err != nil {
				b.Fatalf("appender process %d said %q: %v", i, line, err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			end = max(end, done)
		}
		if time.Now().Before(start) || end < start.UnixNano() {
			b.Fatal("the processes did not start together")
		}
		return one, float64(procs*per*n) / time.Duration(end-start.UnixNano()).Seconds()
	}
	one, many := ratio("store")
	bareOne, bareMany := ratio("bare")
	b.ReportMetric(one, "1-appender-appends/s")
	b.ReportMetric(many, "16-appenders-appends/s")
	b.ReportMetric(many/one, "ratio")
	b.ReportMetric(bareMany/bareOne, "bare-ratio")
}
