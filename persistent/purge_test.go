package persistent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/jackc/pgx/v5"
)

// Purged while idle, then used again: the manager's writes are refused
// with storage.ErrDeleted (whether or not it read the session since), and
// nothing brings the session back; opening the name again starts it
// afresh.
func TestPurgedElsewhereThenAdd(t *testing.T) {
	ctx := context.Background()
	for _, readFirst := range []bool{false, true} {
		path := dbPath(t)
		m := open(t, path, "s", Config{noSync: true})
		addAll(t, m, []ctxstore.Message{user("before")})
		other := otherStore(t, path)
		if err := other.Purge(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if readFirst {
			viewOf(t, m, 10_000)
		}
		for _, write := range []func() error{
			func() error { return m.AddMessage(ctx, user("after")) },
			func() error { return m.SetMessages(ctx, []ctxstore.Message{user("set")}) },
			func() error { return m.Clear(ctx) },
			func() error { return m.AddMessage(ctx, user("again")) },
		} {
			if err := write(); !errors.Is(err, storage.ErrDeleted) {
				t.Fatalf("read first %v: write after a purge elsewhere: %v, want ErrDeleted", readFirst, err)
			}
		}
		if _, err := other.Session(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("read first %v: the purged session came back: %v", readFirst, err)
		}
		n := open(t, path, "s", Config{noSync: true})
		addAll(t, n, []ctxstore.Message{user("fresh")})
		if got := texts(viewOf(t, n, 10_000)); strings.Join(got, "|") != "user:fresh" {
			t.Fatalf("view of the name opened again = %q, want only the new message", got)
		}
	}
}

// A purge by another process while a view is being computed (here from
// inside the summarizer) must not bring the purged session back: the
// decisions computed for it, summary text included, are not saved, and a
// new conversation later started under the same name never sees them.
func TestDecisionsNotSavedIntoPurgedSession(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	other := otherStore(t, path)
	var once sync.Once
	cfg := Config{noSync: true, Config: simple.Config{Strategy: "summarize",
		Summarizer: func(context.Context, []ctxstore.Message) (string, error) {
			once.Do(func() {
				if err := other.Purge(ctx, "s"); err != nil {
					t.Error(err)
				}
			})
			return "SUMMARY OF THE PURGED CONVERSATION", nil
		}}}
	m := open(t, path, "s", cfg)
	addAll(t, m, conversation(60, 400))
	if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000}); err != nil {
		t.Fatal(err)
	}
	settled(t, m) // the decisions are written behind the request
	if _, err := other.Session(ctx, "s"); err == nil {
		t.Fatal("saving view decisions brought the purged session back")
	}
	m.Close()

	n := open(t, path, "s", Config{noSync: true})
	var fresh []ctxstore.Message
	for i := range 20 {
		fresh = append(fresh, user("NEW question "+string(rune('A'+i))))
	}
	addAll(t, n, fresh)
	n.Close()
	r := open(t, path, "s", Config{noSync: true})
	for _, msg := range viewOf(t, r, 3000) {
		if strings.Contains(string(msg.Bytes()), "PURGED CONVERSATION") {
			t.Fatalf("the new conversation's view carries the purged one's summary: %s", msg.Bytes())
		}
	}
}

// Two processes repairing the same interrupted tail at once: one repair
// record, and only one of them reports the calls as repaired.
func TestRepairFromTwoManagersReportsOnce(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	seed := open(t, path, "s", Config{noSync: true})
	addAll(t, seed, []ctxstore.Message{user("run it"), callMsg("c1", "c2")})
	seed.Close()
	for round := range 10 {
		a := open(t, path, "s", Config{noSync: true})
		b := open(t, path, "s", Config{noSync: true})
		var wg sync.WaitGroup
		got := make([][]string, 2)
		for i, m := range []*Manager{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := m.RepairInterruptedTail(ctx)
				if err != nil {
					t.Error(err)
				}
				got[i] = r
			}()
		}
		wg.Wait()
		reported := len(got[0]) + len(got[1])
		if round == 0 && reported != 2 || round > 0 && reported != 0 {
			t.Fatalf("round %d: repairs reported %v, want c1 and c2 once in round 0, none later", round, got)
		}
		a.Close()
		b.Close()
	}
}

// Another process purges the session and starts another conversation under
// its name, by appending (the new session continues after the purged one's
// epoch and seqs) or by importing an export (ctxstore import, which may
// reuse them; the creation time differs). A manager still holding the old
// session never mixes the two: its next append is refused with
// storage.ErrDeleted and its views show the new conversation only.
func TestPurgedAndRecreatedElsewhere(t *testing.T) {
	newTexts := []string{"new a", "new b", "new c", "new d", "new e"}
	for name, recreate := range map[string]func(storage.Engine) error{
		"appended": func(st storage.Engine) error {
			for _, s := range newTexts {
				if _, _, err := storage.Append(context.Background(), st, "s", boltstore.Record{Message: user(s), Tokens: 3}); err != nil {
					return err
				}
			}
			return nil
		},
		"imported": func(st storage.Engine) error {
			info := boltstore.SessionInfo{Name: "s", Created: time.Unix(1_700_000_000, 0), Epoch: 1, LastSeq: uint64(len(newTexts))}
			return storage.ImportSession(context.Background(), st, info, func(yield func(boltstore.Entry, error) bool) {
				for i, s := range newTexts {
					msg := user(s)
					e := boltstore.Entry{Session: "s", Seq: uint64(i + 1), Epoch: 1, Role: msg.Role(), Tokens: 3, Raw: msg.Bytes()}
					if !yield(e, nil) {
						return
					}
				}
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := dbPath(t)
			m := open(t, path, "s", Config{noSync: true})
			addAll(t, m, []ctxstore.Message{system("OLD SYSTEM PROMPT"), user("OLD secret question"), assistant("old answer")})
			other := otherStore(t, path)
			if err := other.Purge(context.Background(), "s"); err != nil {
				t.Fatal(err)
			}
			if err := recreate(other); err != nil {
				t.Fatal(err)
			}
			if err := m.AddMessage(context.Background(), user("after")); !errors.Is(err, storage.ErrDeleted) {
				t.Fatalf("append to the purged session: %v, want ErrDeleted", err)
			}
			var want []string
			for _, s := range newTexts {
				want = append(want, "user:"+s)
			}
			requireTexts(t, "history", texts(history(t, m)), want)
			requireTexts(t, "view", texts(viewOf(t, m, 100_000)), want)
		})
	}
}

// purgeLeaks returns where the store a manager opens as db (see
// governEngines) still holds marker's bytes: the files of a bbolt
// database, the tables of a PostgreSQL schema whose rows do (as text,
// lower-cased as the search index keeps terms, or hex as bytea shows).
func purgeLeaks(t *testing.T, db, marker string) (where []string) {
	t.Helper()
	i := strings.LastIndex(db, "schema=")
	if i < 0 {
		files, _ := filepath.Glob(db + "*")
		return slices.DeleteFunc(files, func(f string) bool { // a file not read may hold it
			b, err := os.ReadFile(f)
			return err == nil && !bytes.Contains(b, []byte(marker))
		})
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db[:i-1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{db[i+len("schema="):]}.Sanitize()
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
}

// A manager's summary of a marker said in epoch 1 is saved in its view
// decisions; after epoch 1 goes (a purge of it, after a Clear or a rewind
// to before the marker, or gc's --keep-epochs) with persistent's rules and
// a scrub, no file under the directory (bbolt) or row (PostgreSQL) holds
// the marker, and the later epoch's decisions stay.
func TestPurgeEpochDropsSummaries(t *testing.T) {
	const marker = "bilbySECRET6021"
	ends := map[string]func(t *testing.T, m *Manager, eng storage.Engine){
		"clear": func(t *testing.T, m *Manager, _ storage.Engine) {
			if err := m.Clear(context.Background()); err != nil {
				t.Fatal(err)
			}
		},
		"rewind": func(t *testing.T, _ *Manager, eng storage.Engine) {
			if _, err := storage.Rewind(context.Background(), eng, "s", 1); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, open := range governEngines() {
		for how, end := range ends {
			for _, purge := range []string{"purge", "gc"} {
				t.Run(name+"/"+how+"/"+purge, func(t *testing.T) {
					db, eng := open(t)
					purgeEpochAfter(t, db, eng, marker, end, purge == "gc")
				})
			}
		}
	}
}

// purgeEpochAfter is TestPurgeEpochDropsSummaries on one engine: epoch 1
// ended by end, purged by storage.PurgeEpoch or (gc) storage.GC.
func purgeEpochAfter(t *testing.T, db string, eng storage.Engine, marker string, end func(*testing.T, *Manager, storage.Engine), gc bool) {
	ctx := context.Background()
	cfg := Config{Config: simple.Config{Strategy: "summarize",
		Summarizer: func(_ context.Context, msgs []ctxstore.Message) (string, error) {
			return echoSummary(marker, msgs), nil
		}}}
	m, err := Open(db, "s", cfg)
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
		settled(t, m)
		for d, err := range eng.ListDerived(ctx, "s", KindView) {
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
	end(t, m, eng)
	time.Sleep(300 * time.Millisecond) // epoch 1 ends before gc's cutoff
	addAll(t, m, conversation(60, 400))
	request()
	if gc {
		info, err := eng.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		pol := storage.Retention{OlderThan: 100 * time.Millisecond, KeepEpochs: 1, EpochDrops: EpochDrops(), Now: info.Updated.Add(time.Millisecond)}
		rep, err := storage.GC(ctx, eng, pol)
		if err != nil || len(rep.Epochs) != 1 || rep.Epochs[0].Epoch != 1 {
			t.Fatalf("gc: %+v %v, want epoch 1 purged", rep, err)
		}
	} else {
		if err := storage.PurgeEpoch(ctx, eng, "s", 1, EpochDrops()); err != nil {
			t.Fatal(err)
		}
		if _, err := storage.Scrub(ctx, eng); err != nil {
			t.Fatal(err)
		}
	}
	n, keys := views()
	if n != 0 || len(keys) == 0 || !strings.HasPrefix(keys[0], epochViews(2)) {
		t.Fatalf("after the purge %d view records hold the marker; keys %v, want epoch 2's only", n, keys)
	}
	if where := purgeLeaks(t, db, marker); len(where) > 0 {
		t.Fatalf("the marker is still in %v after the purge and the scrub", where)
	}
	request() // the manager goes on over epoch 2
}
