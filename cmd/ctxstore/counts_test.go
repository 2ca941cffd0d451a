package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
)

// isServer reports whether db names a PostgreSQL database rather than a
// file.
func isServer(db string) bool { return pgdsn.Is(db) }

// openEngine opens the test's database read-write, for writing what the
// command cannot (counts of other counters, kept recounts).
func (e *env) openEngine() storage.Engine {
	e.t.Helper()
	var st storage.Engine
	var err error
	if isServer(e.db) {
		st, err = (&app{}).openAt(context.Background(), e.db, readWrite)
	} else {
		st, err = boltstore.Open(e.db, boltstore.Options{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestTokenTotalsNeverMixCounters: a session whose counts two counters made
// (a file counted ~4 bytes per token, then messages added with the exact
// default counter) shows no token total in ls and stats, only each
// counter's share and how to get an exact one; --recount gives that exact
// total, using the counts a persistent manager kept. On PostgreSQL, whose
// metadata does not split counts by counter, the server adds the split up.
func TestTokenTotalsNeverMixCounters(t *testing.T) {
	for _, engine := range []string{"file", "PostgreSQL"} {
		t.Run(engine, func(t *testing.T) {
			e := newEngineEnv(t, engine)
			ctx := context.Background()
			msgs := []ctxstore.Message{
				ctxstore.NewMessage("user", "kubectl get pods -n prod -o wide | grep 3f2a9c1e-77d0-4b5e"),
				ctxstore.NewMessage("assistant", "Two pods are in CrashLoopBackOff."),
				ctxstore.NewMessage("user", "Show the logs."),
			}
			// Each message's exact count by the default counter, from the
			// command itself (the test process does not load a vocabulary:
			// TestExportHeapFlat measures its heap).
			counts, scratch := make([]int, len(msgs)), filepath.Join(e.dir, "scratch.db")
			exact := ""
			for i, m := range msgs {
				name := fmt.Sprint("m", i)
				e.ok(string(m.Bytes()), "--db", scratch, "add", name)
				got := lsJSON(t, e, name, "--db", scratch)
				counts[i], exact = *got.Tokens, got.Counters[0].Counter
			}
			st := e.openEngine()
			old := func(m ctxstore.Message) boltstore.Record { return boltstore.Record{Message: m, Tokens: m.Size() / 4} }
			if _, _, err := storage.Append(ctx, st, "mixed", old(msgs[0]), old(msgs[1])); err != nil {
				t.Fatal(err)
			}
			// A persistent manager recounted message 1 and kept the count:
			// --recount reads it (a figure no counter would give, to see it).
			const keptCount = 777
			want := keptCount + counts[1] + counts[2] // the exact total
			if err := storage.PutDerived(ctx, st, "mixed", persistent.KindCounts, persistent.CountsKey(exact, 1), []byte(`{"1":777}`)); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			e.ok(string(msgs[2].Bytes()), "add", "mixed") // counted by the default counter
			last := counts[2]
			oldSum := (msgs[0].Size() / 4) + (msgs[1].Size() / 4)
			mixedSum := strconv.Itoa(oldSum + last)
			e.ok(`{"role":"user","content":"only the exact counter"}`, "add", "clean")
			cleanInfo := lsJSON(t, e, "clean")

			ls := e.ok("", "ls").stdout
			row := lineWith(t, ls, "mixed ")
			if regexp.MustCompile(`\b`+mixedSum+`\b`).MatchString(ls) || !strings.Contains(row, " - ") || !strings.Contains(row, "mixed") {
				t.Errorf("ls shows a sum of two counters' counts (%s) or no 'mixed' row:\n%s", mixedSum, ls)
			}
			split := fmt.Sprintf("2 messages by unnamed (%d tokens), 1 by %s (%d tokens)", oldSum, exact, last)
			for _, w := range []string{split, "ls --recount"} {
				if !strings.Contains(ls, w) {
					t.Errorf("ls lacks %q:\n%s", w, ls)
				}
			}
			if row := lineWith(t, ls, "clean "); !strings.Contains(row, " "+strconv.Itoa(*cleanInfo.Tokens)+" ") || !strings.Contains(row, exact) {
				t.Errorf("ls: a session one counter counted shows its total and counter:\n%s", ls)
			}
			if got := lsJSON(t, e, "mixed"); got.Tokens != nil || len(got.Counters) != 2 {
				t.Errorf("ls --json: tokens %v, counters %+v; want null and two counters", got.Tokens, got.Counters)
			}

			stats := e.ok("", "stats").stdout
			tokens := lineWith(t, stats, "tokens ")
			if sums := regexp.MustCompile(`\b(` + mixedSum + `|` + strconv.Itoa(oldSum+last+*cleanInfo.Tokens) + `)\b`); sums.MatchString(stats) ||
				!strings.Contains(tokens, "not added up") || !strings.Contains(stats, "stats --recount") {
				t.Errorf("stats adds counts of two counters, or does not say it will not:\n%s", stats)
			}
			var sj totals
			if err := json.Unmarshal([]byte(e.ok("", "stats", "--json").stdout), &sj); err != nil || sj.Tokens != nil || len(sj.Counters) != 2 {
				t.Errorf("stats --json: tokens %v, counters %+v, %v; want null and two counters", sj.Tokens, sj.Counters, err)
			}

			// An export carries each count's counter; an import keeps it.
			dump, fresh := filepath.Join(e.dir, "dump.jsonl"), filepath.Join(e.dir, "fresh.db")
			e.ok("", "export", "-o", dump)
			e.ok("", "--db", fresh, "import", dump)
			if got := e.ok("", "--db", fresh, "ls").stdout; !strings.Contains(got, split) || !strings.Contains(lineWith(t, got, "clean "), exact) {
				t.Errorf("ls after export and import lacks %q, or the clean session's counter:\n%s", split, got)
			}

			// --recount: exact totals by the default counter.
			ls = e.ok("", "ls", "--recount").stdout
			if row := lineWith(t, ls, "mixed "); !strings.Contains(row, " "+strconv.Itoa(want)+" ") || !strings.Contains(row, exact) || strings.Contains(ls, "not added up") {
				t.Errorf("ls --recount: want %d by %s for the mixed session:\n%s", want, exact, ls)
			}
			stats = e.ok("", "stats", "--recount").stdout
			if w := fmt.Sprintf(" %d (by %s, current epochs)", want+*cleanInfo.Tokens, exact); !strings.HasSuffix(lineWith(t, stats, "tokens "), w) {
				t.Errorf("stats --recount: want tokens%s:\n%s", w, stats)
			}
		})
	}
}

// lsJSON returns one session of ls --json, run with args.
func lsJSON(t *testing.T, e *env, name string, args ...string) sessionJSON {
	t.Helper()
	var out []sessionJSON
	r := e.ok("", append([]string{"ls", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	for _, s := range out {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("ls --json lacks session %q:\n%s", name, r.stdout)
	return sessionJSON{}
}

// lineWith returns the line of out that starts with prefix.
func lineWith(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, out)
	return ""
}
