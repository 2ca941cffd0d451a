package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/export"
)

// hostileExport is an export of one session "a" holding one message, with
// the session record's metadata and the message record's fields as given.
func hostileExport(sessionExtra, msgExtra string) string {
	const ts = "2026-11-23T10:00:00Z"
	return `{"format":"ctxstore-export","version":1,"sessions":1}` + "\n" +
		`{"type":"session","name":"a","created":"` + ts + `","updated":"` + ts + `",` + sessionExtra + `}` + "\n" +
		`{"type":"message","time":"` + ts + `","message":{"role":"user","content":"x"},` + msgExtra + `}` + "\n" +
		`{"type":"end","sessions":1,"messages":1}` + "\n"
}

const (
	okSession = `"epoch":1,"last_seq":1,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":1,"messages":1}]`
	okMessage = `"seq":1,"epoch":1,"tokens":1`
)

// An export is input like any other: each hostile one is refused as a
// whole with an error naming the session and the line, and leaves a store
// (a file or PostgreSQL: the engines check an import alike) that
// verifies, lists, exports and purges as before.
func TestHostileImports(t *testing.T) {
	deep := `{"type":"message","seq":1,"epoch":1,"tokens":1,"message":{"role":"user","content":"x","n":` +
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}`
	cases := []struct {
		name, export string
		want         []string
		// firstKept: the export's first, valid session "a" is imported
		// (import goes session by session) before the refusal.
		firstKept bool
	}{
		{"seq 2^64-1", hostileExport(`"epoch":1,"last_seq":18446744073709551615,"messages":1,"epochs":[{"epoch":1,"first_seq":18446744073709551615,"last_seq":18446744073709551615,"messages":1}]`,
			`"seq":18446744073709551615,"epoch":1,"tokens":1`), []string{`"a"`, "line 2"}, false},
		{"seq past the last", hostileExport(okSession, `"seq":2,"epoch":1,"tokens":1`), []string{`"a"`, "after the session's last seq"}, false},
		{"epoch after the current one", hostileExport(`"epoch":1,"last_seq":1,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":1,"messages":1},{"epoch":5,"first_seq":2,"last_seq":1,"messages":0}]`, okMessage),
			[]string{`"a"`, "epoch 5, after the current epoch 1"}, false},
		{"message epoch after the current one", hostileExport(okSession, `"seq":1,"epoch":3,"tokens":1`), []string{`"a"`, "epoch 3"}, false},
		{"negative epoch count", hostileExport(`"epoch":1,"last_seq":1,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":1,"messages":-5}]`, okMessage), []string{`"a"`, "negative"}, false},
		{"negative tokens", hostileExport(okSession, `"seq":1,"epoch":1,"tokens":-7`), []string{`"a"`, "negative token count"}, false},
		{"duplicate session", strings.Replace(hostileExport(okSession, okMessage), `{"type":"end","sessions":1`,
			strings.SplitAfter(hostileExport(okSession, okMessage), "\n")[1]+strings.SplitAfter(hostileExport(okSession, okMessage), "\n")[2]+`{"type":"end","sessions":2`, 1),
			[]string{`"a"`, "line 4", "second time"}, true},
		{"name not UTF-8", strings.Replace(hostileExport(okSession, okMessage), `"name":"a"`, "\"name\":\"a\xff\"", 1), []string{"line 2", "not valid UTF-8"}, false},
		{"nested too deep", strings.Replace(hostileExport(okSession, okMessage), strings.SplitAfter(hostileExport(okSession, okMessage), "\n")[2], deep+"\n", 1),
			[]string{`"a"`, "line 3"}, false},
		// Metadata contradicting itself or the message.
		{"last seq before the epoch's", hostileExport(`"epoch":1,"last_seq":1,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":3,"messages":1}]`, okMessage),
			[]string{`"a"`, "line 2", "invalid import", "epoch 1: last seq 3 after the session's last seq 1"}, false},
		{"epochs out of order", hostileExport(`"epoch":2,"last_seq":2,"messages":1,"epochs":[{"epoch":2,"first_seq":2,"last_seq":2,"messages":0},{"epoch":1,"first_seq":1,"last_seq":1,"messages":1}]`, okMessage),
			[]string{`"a"`, "invalid import", "out of order"}, false},
		{"message outside its epoch", hostileExport(`"epoch":2,"last_seq":2,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":1,"messages":0},{"epoch":2,"first_seq":2,"last_seq":2,"messages":1}]`, `"seq":2,"epoch":1,"tokens":1`),
			[]string{`"a"`, "line 3", "invalid import", "outside epoch 1's seqs 1-1"}, false},
	}
	for _, engine := range []string{"file", "PostgreSQL"} {
		for _, c := range cases {
			t.Run(engine+"/"+c.name, func(t *testing.T) {
				hostileImport(t, newEngineEnv(t, engine), c.export, c.want, c.firstKept)
			})
		}
	}
}

// hostileImport imports export, which must fail with want, and checks that
// the store is as before.
func hostileImport(t *testing.T, e *env, export string, want []string, firstKept bool) {
	t.Helper()
	e.ok(conversation, "add", "keep")
	in := filepath.Join(e.dir, "hostile.jsonl")
	writeFile(t, in, export)
	e.fail(1, "", []string{"import", in}, want...)
	if firstKept {
		e.ok("", "purge", "a", "--yes")
	}
	e.fail(1, "", []string{"import", "--skip-existing", in}, want...)
	e.ok("", "verify")
	out := e.ok("", "ls").stdout
	if strings.Contains(out, "\na ") != firstKept || !strings.Contains(out, "keep") {
		t.Errorf("ls after a refused import:\n%s", out)
	}
	e.ok("", "export")
	e.ok("", "purge", "keep", "--yes")
	e.ok("", "verify")
}

// What add accepts comes back through export and import, at the nesting
// limit too; one level deeper, add refuses it.
func TestNestingLimitRoundTrips(t *testing.T) {
	e := newEnv(t)
	msg := func(depth int) string {
		// The message object is level 1.
		return `{"role":"user","content":"x","n":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}\n"
	}
	e.ok(msg(1000), "add", "s")
	e.fail(1, msg(1001), []string{"add", "s"}, "nested deeper")
	out := e.ok("", "export").stdout
	fresh := newEnv(t)
	fresh.ok(out, "import", "-")
	fresh.ok("", "verify")
	if again := fresh.ok("", "export").stdout; again != out {
		t.Error("export, import, export gives different bytes")
	}
}

// FuzzImport feeds readExport arbitrary exports: whatever it accepts, the
// file verifies clean afterwards, and what it refuses leaves no trace.
func FuzzImport(f *testing.F) {
	f.Add(hostileExport(okSession, okMessage))
	f.Add(hostileExport(`"epoch":2,"last_seq":3,"messages":1,"epochs":[{"epoch":1,"first_seq":1,"last_seq":2,"messages":2},{"epoch":2,"first_seq":3,"last_seq":3,"messages":1}]`, `"seq":3,"epoch":2,"tokens":4`))
	f.Add(hostileExport(`"epoch":1,"last_seq":18446744073709551615,"messages":1,"epochs":[]`, `"seq":18446744073709551615,"epoch":1,"tokens":1`))
	f.Add(hostileExport(`"epoch":1,"last_seq":1,"messages":-1,"epochs":[{"epoch":9,"first_seq":5,"last_seq":1,"messages":-5}]`, `"seq":1,"epoch":1,"tokens":-1`))
	f.Fuzz(func(t *testing.T, exported string) {
		ctx := context.Background()
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "f.db"), boltstore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if !strings.HasPrefix(exported, `{"format"`) {
			return
		}
		stats, ierr := export.Read(ctx, st, strings.NewReader(exported), export.Options{Name: "fuzz"})
		rep, err := storage.Verify(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Intact() {
			t.Fatalf("after import (%+v, %v) the file does not verify:\n%s", stats, ierr, rep)
		}
		if infos, err := st.Sessions(ctx); err != nil || len(infos) != stats.Sessions {
			t.Fatalf("%d sessions in the file, import reported %d (%v, %v)", len(infos), stats.Sessions, ierr, err)
		}
	})
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
