package resume

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// The malformed lines of the idFull fixture and what their reasons mention.
var fullMalformed = map[int]string{
	8:  "not valid JSON",    // truncated JSON
	9:  `"role": missing`,   // no role
	10: "not a JSON object", // an array
	14: "tool_call_id",      // tool result naming no call
}

const fullLines, fullValid = 15, 11 // non-blank lines, valid messages

func openStore(t *testing.T, path string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// validLines is the oracle: the fixture's valid lines, trimmed, in order.
func validLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if _, err := ctxstore.ParseMessage(l); err == nil {
			out = append(out, l)
		}
	}
	return out
}

func stored(t *testing.T, st *boltstore.Store, session string) []boltstore.Entry {
	t.Helper()
	var out []boltstore.Entry
	for e, err := range st.Messages(context.Background(), session, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestIngestFileFixture(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	src := jsonlPath(root, idFull)
	before := fileHash(t, src)
	fi0, _ := os.Stat(src)
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))

	rep, err := IngestFile(ctx, st, idFull, src, IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != fullLines || rep.Imported != fullValid || rep.Skipped != "" || rep.Source != src {
		t.Errorf("report = %+v; want %d lines, %d imported", rep, fullLines, fullValid)
	}
	var lines []int
	for _, e := range rep.Malformed {
		lines = append(lines, e.Line)
		if want := fullMalformed[e.Line]; want == "" || !strings.Contains(e.Err, want) {
			t.Errorf("line %d reported as %q, want a reason mentioning %q", e.Line, e.Err, want)
		}
	}
	if !slices.Equal(lines, []int{8, 9, 10, 14}) {
		t.Errorf("malformed lines %v, want [8 9 10 14]", lines)
	}

	// Byte for byte, timestamps and all, with the manager's token estimates.
	want := validLines(t, src)
	got := stored(t, st, idFull)
	if len(got) != len(want) {
		t.Fatalf("stored %d messages, want %d", len(got), len(want))
	}
	for i, e := range got {
		if !bytes.Equal(e.Raw, want[i]) {
			t.Errorf("message %d stored as %s, want %s", i, e.Raw, want[i])
		}
		m, _ := e.Message()
		if e.Tokens != tokens.O200k().Estimate(m) || e.Tokens == 0 {
			t.Errorf("message %d: %d tokens stored, estimator says %d", i, e.Tokens, tokens.O200k().Estimate(m))
		}
	}
	if rep.FirstSeq != got[0].Seq || rep.LastSeq != got[len(got)-1].Seq {
		t.Errorf("seqs %d..%d, stored %d..%d", rep.FirstSeq, rep.LastSeq, got[0].Seq, got[len(got)-1].Seq)
	}

	// The JSONL is read, never written.
	fi1, _ := os.Stat(src)
	if fileHash(t, src) != before || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Error("the JSONL changed during the import")
	}
}

func TestImportOnlyOnce(t *testing.T) {
	ctx := context.Background()
	root := fakeHome(t)
	src := jsonlPath(root, idFull)
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
	if _, err := IngestFile(ctx, st, idFull, src, IngestOptions{}); err != nil {
		t.Fatal(err)
	}

	rep, err := IngestFile(ctx, st, idFull, src, IngestOptions{})
	if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "already imported") || len(rep.Malformed) != 0 {
		t.Errorf("second import: %+v, %v", rep, err)
	}
	// Even after a Clear: the import record says it was done.
	if _, err := st.Clear(ctx, idFull); err != nil {
		t.Fatal(err)
	}
	rep, err = IngestFile(ctx, st, idFull, src, IngestOptions{})
	if err != nil || rep.Imported != 0 || rep.Skipped == "" {
		t.Errorf("import after Clear: %+v, %v", rep, err)
	}
	// The file growing afterwards is mentioned, not imported.
	f, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"role": "user", "content": "late"}`)
	f.Close()
	rep, err = IngestFile(ctx, st, idFull, src, IngestOptions{})
	if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "changed since") {
		t.Errorf("import of a grown file: %+v, %v", rep, err)
	}
}

func TestImportIntoNonEmptySessionSkips(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
	own := ctxstore.NewMessage(ctxstore.RoleUser, "already here")
	if _, _, err := storage.Append(ctx, st, "s", boltstore.Record{Message: own, Tokens: 3}); err != nil {
		t.Fatal(err)
	}
	rep, err := IngestJSONL(ctx, st, "s", strings.NewReader(`{"role":"user","content":"from the file"}`+"\n"), IngestOptions{})
	if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "already holds 1 messages") || rep.Source != "stdin" {
		t.Errorf("report %+v, err %v", rep, err)
	}
	if got := stored(t, st, "s"); len(got) != 1 || !bytes.Equal(got[0].Raw, own.Bytes()) {
		t.Errorf("session now holds %d messages", len(got))
	}
}

func TestImportLimitsLineSize(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
	big := `{"role":"tool","tool_call_id":"c","content":"` + strings.Repeat("y", 2000) + `"}`
	in := `{"role":"user","content":"a"}` + "\n" + big + "\n" + `{"role":"user","content":"b"}` + "\n"
	rep, err := IngestJSONL(ctx, st, "s", strings.NewReader(in), IngestOptions{MaxMessageBytes: 1000})
	if err != nil || rep.Imported != 2 || len(rep.Malformed) != 1 || rep.Malformed[0].Line != 2 ||
		!strings.Contains(rep.Malformed[0].Err, "over the limit of 1000") {
		t.Fatalf("report %+v, err %v", rep, err)
	}
}

// bigJSONL writes n valid messages, one malformed line every 100 lines.
func bigJSONL(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	var valid [][]byte
	for i := range n {
		if i%100 == 50 {
			buf.WriteString("{\"role\": \"user\", \"content\": \"cut\n")
		}
		l := fmt.Appendf(nil, `{"role": "user", "content": "message %d", "timestamp": "2025-10-14T09:%02d:%02d.000+00:00"}`, i, i/60%60, i%60)
		valid = append(valid, l)
		buf.Write(l)
		buf.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), JSONLName)
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, valid
}

// An import cut short between batches (here by cancelling its context, as a
// crash would leave it) is continued on the next attempt, without
// duplicating or losing a message.
func TestImportContinuesAfterInterruption(t *testing.T) {
	root := t.TempDir()
	src, valid := bigJSONL(t, 2500)
	st := openStore(t, filepath.Join(root, "x.db"))

	ctx, cancel := context.WithCancel(context.Background())
	rep, err := IngestFile(ctx, st, "s", src, IngestOptions{Progress: func(_ int64, imported int) {
		if imported >= defaultBatchMessages {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || rep.Imported != defaultBatchMessages {
		t.Fatalf("interrupted import: %+v, %v", rep, err)
	}

	rep, err = IngestFile(context.Background(), st, "s", src, IngestOptions{})
	if err != nil || rep.Continued != defaultBatchMessages || rep.Imported != len(valid)-defaultBatchMessages ||
		len(rep.Malformed) != 25 {
		t.Fatalf("continued import: continued %d imported %d malformed %d, %v", rep.Continued, rep.Imported, len(rep.Malformed), err)
	}
	requireExact(t, stored(t, st, "s"), valid)
	rep, err = IngestFile(context.Background(), st, "s", src, IngestOptions{})
	if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "already imported") {
		t.Fatalf("third import: %+v, %v", rep, err)
	}
}

// If someone wrote to the session between the interruption and the retry,
// the import refuses to guess: IngestFile says ErrIngestConflict, Open
// opens the session as stored with a note, and both only once.
func TestImportConflictAfterInterruption(t *testing.T) {
	bg := context.Background()
	for _, first := range []string{"IngestFile", "Open"} {
		t.Run(first, func(t *testing.T) {
			src, _ := bigJSONL(t, 1500)
			st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
			ctx, cancel := context.WithCancel(bg)
			_, err := IngestFile(ctx, st, "s", src, IngestOptions{Progress: func(int64, int) { cancel() }})
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if _, _, err := st.Append(bg, "s", boltstore.Record{Message: ctxstore.NewMessage("user", "meanwhile"), Tokens: 1}); err != nil {
				t.Fatal(err)
			}
			n := len(stored(t, st, "s"))

			if first == "IngestFile" {
				rep, err := IngestFile(bg, st, "s", src, IngestOptions{})
				if !errors.Is(err, ErrIngestConflict) || rep.Imported != 0 {
					t.Fatalf("report %+v, err %v; want ErrIngestConflict", rep, err)
				}
			} else {
				m, rep, err := Open(bg, Options{Path: filepath.Dir(src), Session: "s", DBPath: st.Path()})
				if err != nil {
					t.Fatal(err)
				}
				m.Close()
				if rep.Messages != n || rep.Migrated != 0 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "cannot be continued") {
					t.Fatalf("resume after a conflict: %+v", rep)
				}
			}
			if got := len(stored(t, st, "s")); got != n {
				t.Fatalf("conflicting import changed the session: %d -> %d messages", n, got)
			}
			rep, err := IngestFile(bg, st, "s", src, IngestOptions{})
			if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "could not be continued") {
				t.Fatalf("import after the conflict: %+v, %v", rep, err)
			}
		})
	}
}

// Importers racing in one process (goroutines sharing a Store) import the
// source exactly once between them.
func TestConcurrentImportsInProcess(t *testing.T) {
	src, valid := bigJSONL(t, 2500)
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
	const n = 6
	reps := make([]IngestReport, n)
	errs := make([]error, n)
	done := make(chan int)
	for i := range n {
		go func() {
			reps[i], errs[i] = IngestFile(context.Background(), st, "s", src, IngestOptions{})
			done <- i
		}()
	}
	imported := 0
	for range n {
		i := <-done
		if errs[i] != nil {
			t.Fatalf("importer %d: %v", i, errs[i])
		}
		imported += reps[i].Imported + reps[i].Continued
	}
	if imported != len(valid) {
		t.Errorf("importers imported %d messages in all, want %d", imported, len(valid))
	}
	requireExact(t, stored(t, st, "s"), valid)
}

// An importer whose claim lapsed (stalled past the lease, say) and was
// taken over neither duplicates a message nor overwrites its successor's
// record: its next batch finds the session moved on and it stops with
// ErrIngestConflict, leaving the successor's complete import standing.
func TestLapsedImporterStopsWithoutDuplicating(t *testing.T) {
	bg := context.Background()
	src, valid := bigJSONL(t, 2500)
	st := openStore(t, filepath.Join(t.TempDir(), "x.db"))

	stalled, resume := make(chan struct{}), make(chan struct{})
	var first IngestReport
	var firstErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		once := false
		first, firstErr = IngestFile(bg, st, "s", src, IngestOptions{Progress: func(int64, int) {
			if !once {
				once = true
				close(stalled)
				<-resume
			}
		}})
	}()
	<-stalled
	// The stalled importer's lease runs out: its record now names nobody.
	rec, found, err := loadImportRecord(bg, st, "s", src)
	if err != nil || !found || rec.Claim == "" {
		t.Fatalf("record while importing: %+v, %v, %v", rec, found, err)
	}
	rec.Heartbeat = rec.Heartbeat.Add(-2 * importLease)
	b, _ := json.Marshal(rec)
	if err := st.PutDerived(bg, "s", KindIngest, src, b); err != nil {
		t.Fatal(err)
	}
	rep, err := IngestFile(bg, st, "s", src, IngestOptions{})
	if err != nil || rep.Continued != defaultBatchMessages || rep.Imported != len(valid)-defaultBatchMessages {
		t.Fatalf("taking over: %+v, %v", rep, err)
	}
	close(resume)
	<-finished
	if !errors.Is(firstErr, ErrIngestConflict) || first.Imported != defaultBatchMessages {
		t.Fatalf("lapsed importer: %+v, %v; want ErrIngestConflict after its first batch", first, firstErr)
	}
	requireExact(t, stored(t, st, "s"), valid)
	rec, _, err = loadImportRecord(bg, st, "s", src)
	if err != nil || rec.State != importDone || rec.Imported != len(valid) {
		t.Fatalf("record after both: %+v, %v", rec, err)
	}
}

// readerFunc runs before its first Read: a hook between an import's claim
// and its first batch.
type readerFunc struct {
	r      io.Reader
	before func()
}

func (h *readerFunc) Read(p []byte) (int, error) {
	if h.before != nil {
		h.before()
		h.before = nil
	}
	return h.r.Read(p)
}

// Another writer seeds, clears or purges the session between an import's
// claim and its first batch: the import writes nothing, says why and
// returns no error.
func TestImportSessionChangedBeforeFirstBatch(t *testing.T) {
	bg := context.Background()
	for name, act := range map[string]func(*boltstore.Store) error{
		"seeded": func(st *boltstore.Store) error {
			_, _, err := st.Append(bg, "s", boltstore.Record{Message: ctxstore.NewMessage("user", "mine"), Tokens: 1})
			return err
		},
		"cleared": func(st *boltstore.Store) error { _, err := st.Clear(bg, "s"); return err },
		"purged":  func(st *boltstore.Store) error { return st.Purge(bg, "s") },
	} {
		t.Run(name, func(t *testing.T) {
			src, _ := bigJSONL(t, 50)
			st := openStore(t, filepath.Join(t.TempDir(), "x.db"))
			f, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := &readerFunc{r: f, before: func() {
				if err := act(st); err != nil {
					t.Error(err)
				}
			}}
			rep, err := IngestJSONL(bg, st, "s", r, IngestOptions{Source: src})
			if err != nil || rep.Imported != 0 || !strings.Contains(rep.Skipped, "changed the session before the import began") {
				t.Fatalf("import: %+v, %v", rep, err)
			}
			want := 0
			if name == "seeded" {
				want = 1
			}
			if got := len(stored(t, st, "s")); got != want {
				t.Fatalf("session holds %d messages, want %d", got, want)
			}
			// A purge takes the import record with it: the session is
			// forgotten, so the next import starts afresh. Otherwise the
			// source is done.
			rep, err = IngestFile(bg, st, "s", src, IngestOptions{})
			if name == "purged" {
				if err != nil || rep.Imported != 50 {
					t.Fatalf("import after the purge: %+v, %v", rep, err)
				}
				return
			}
			if err != nil || rep.Imported != 0 || rep.Skipped == "" {
				t.Fatalf("next import: %+v, %v", rep, err)
			}
		})
	}
}
