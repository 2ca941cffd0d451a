package boltstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// msgKey identifies a stored message.
type msgKey struct {
	session string
	seq     uint64
}

// testStore is a store file with a few sessions and what it holds.
type testStore struct {
	path string
	msgs map[msgKey]Entry
}

// makeTestStore fills a store with sessions appended round-robin in small batches
// (so their pages interleave in the file): text, tool calls and results, a Clear (two
// epochs), a message large enough to need overflow pages, derived records, and a
// dangling tool call at the end of one session.
func makeTestStore(t testing.TB, path string, perSession int) *testStore {
	t.Helper()
	ctx := context.Background()
	// NoSync: a fixture that is thrown away needs no fsync, and it keeps the test fast.
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	sessions := []string{"alpha", "beta", "gamma/with slash", "δ-unicode"}
	n := 0
	for i := 0; i < perSession; i += 5 {
		for si, s := range sessions {
			var recs []Record
			for j := range 5 {
				k := i + j
				var raw string
				switch {
				case k%7 == 3 && k+1 < perSession:
					raw = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call-%d-%d","type":"function","function":{"name":"f","arguments":"{}"}}]}`, si, k)
				case k%7 == 4:
					raw = fmt.Sprintf(`{"role":"tool","tool_call_id":"call-%d-%d","content":%q}`, si, k-1, strings.Repeat("r", rng.IntN(300)))
				case k == 10 && si == 1:
					raw = fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat("big ", 6000))
				default:
					role := []string{"user", "assistant"}[k%2]
					raw = fmt.Sprintf(`{"role":%q,"content":%q,"n":%d}`, role, strings.Repeat(string(rune('a'+rng.IntN(26))), 50+rng.IntN(400)), n)
				}
				n++
				recs = append(recs, Record{Message: ctxstore.MustParseMessage([]byte(raw)), Tokens: len(raw) / 4})
			}
			if _, _, err := st.Append(ctx, s, recs...); err != nil {
				t.Fatal(err)
			}
		}
		if i == perSession/2 {
			if _, err := st.Clear(ctx, "beta"); err != nil {
				t.Fatal(err)
			}
			if err := st.PutDerived(ctx, "alpha", "summary", "1", []byte("a summary")); err != nil {
				t.Fatal(err)
			}
		}
	}
	dangling := ctxstore.MustParseMessage([]byte(`{"role":"assistant","tool_calls":[{"id":"dangling","type":"function","function":{"name":"f","arguments":"{}"}}]}`))
	if _, _, err := st.Append(ctx, "alpha", Record{Message: dangling, Tokens: 9}); err != nil {
		t.Fatal(err)
	}
	ts := &testStore{path: path, msgs: allMessages(t, st)}
	return ts
}

// allMessages reads every message of every epoch through the store's API.
func allMessages(t testing.TB, st *Store) map[msgKey]Entry {
	t.Helper()
	ctx := context.Background()
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[msgKey]Entry{}
	for _, si := range infos {
		for _, ep := range si.Epochs {
			for e, err := range st.EpochMessages(ctx, si.Name, ep.Epoch, 0) {
				if err != nil {
					t.Fatalf("session %q epoch %d: %v", si.Name, ep.Epoch, err)
				}
				out[msgKey{si.Name, e.Seq}] = e
			}
		}
	}
	return out
}

func sameEntry(a, b Entry) bool {
	return a.Session == b.Session && a.Seq == b.Seq && a.Epoch == b.Epoch && a.Time.Equal(b.Time) &&
		a.Role == b.Role && a.Tokens == b.Tokens && bytes.Equal(a.Raw, b.Raw) &&
		slices.Equal(a.CallIDs, b.CallIDs) && slices.Equal(a.ResultIDs, b.ResultIDs)
}

func TestSalvageIntactCopiesEverything(t *testing.T) {
	dir := t.TempDir()
	ts := makeTestStore(t, filepath.Join(dir, "src.db"), 60)
	before := fileHash(t, ts.path)
	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(context.Background(), ts.path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Recovered != len(ts.msgs) || rep.Derived != 1 {
		t.Errorf("report: want OK with %d messages and 1 derived record, got\n%s", len(ts.msgs), rep)
	}
	if fileHash(t, ts.path) != before {
		t.Error("salvage modified the source")
	}
	got := openMessages(t, dst)
	if len(got) != len(ts.msgs) {
		t.Errorf("dst holds %d messages, want %d", len(got), len(ts.msgs))
	}
	for k, want := range ts.msgs {
		if g, ok := got[k]; !ok || !sameEntry(g, want) {
			t.Errorf("%v: got %+v, want %+v", k, g, want)
			break
		}
	}
	// Session metadata survives: epochs and title.
	st, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	beta, err := st.Session(context.Background(), "beta")
	if err != nil {
		t.Fatal(err)
	}
	if beta.Epoch != 2 || len(beta.Epochs) != 2 {
		t.Errorf("beta: want epoch 2 of 2, got %+v", beta)
	}
	if v, err := derivedValue(st, "alpha", "summary", "1"); err != nil || string(v) != "a summary" {
		t.Errorf("derived record: %q, %v", v, err)
	}
	if _, err := Salvage(context.Background(), ts.path, dst); err == nil {
		t.Error("salvage over an existing destination must fail")
	}
}

func openMessages(t testing.TB, path string) map[msgKey]Entry {
	t.Helper()
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return allMessages(t, st)
}

// pageSpan is a page and its overflow pages.
type pageSpan struct{ id, n uint64 }

// messagePages maps every message of a good store file to the pages it depends on:
// every page from the root down to its leaf, so that damage to any of them may cut
// it off.
func messagePages(t testing.TB, path string) (map[msgKey][]pageSpan, int) {
	t.Helper()
	bf, err := boltpage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	out := map[msgKey][]pageSpan{}
	var walk func(root boltpage.BucketRoot, stack []pageSpan, fn func(stack []pageSpan, e boltpage.Elem))
	walk = func(root boltpage.BucketRoot, stack []pageSpan, fn func(stack []pageSpan, e boltpage.Elem)) {
		var visit func(id uint64, stack []pageSpan)
		leafElems := func(buf []byte, count uint16, stack []pageSpan) {
			for i := range int(count) {
				e, err := boltpage.LeafElem(buf, i)
				if err != nil {
					t.Fatal(err)
				}
				fn(stack, e)
			}
		}
		visit = func(id uint64, stack []pageSpan) {
			h, buf, err := bf.Page(id)
			if err != nil {
				t.Fatal(err)
			}
			stack = append(slices.Clone(stack), pageSpan{id, uint64(h.Overflow) + 1})
			if h.Flags == boltpage.LeafPage {
				leafElems(buf, h.Count, stack)
				return
			}
			for i := range int(h.Count) {
				_, child, err := boltpage.BranchElem(buf, i)
				if err != nil {
					t.Fatal(err)
				}
				visit(child, stack)
			}
		}
		if root.Page == 0 {
			leafElems(root.Inline, boltpage.ParsePageHeader(root.Inline).Count, stack)
			return
		}
		visit(root.Page, stack)
	}
	var names func(path []string, root boltpage.BucketRoot, stack []pageSpan)
	names = func(path []string, root boltpage.BucketRoot, stack []pageSpan) {
		walk(root, stack, func(stack []pageSpan, e boltpage.Elem) {
			p := append(slices.Clone(path), string(e.Key))
			switch {
			case e.Bucket && (len(p) <= 2 || len(p) == 3 && p[2] == layout.BucketMsgs) && p[0] == layout.BucketSessions:
				br, err := boltpage.SubBucket(e.Value)
				if err != nil {
					t.Fatal(err)
				}
				names(p, br, stack)
			case !e.Bucket && len(p) == 4 && p[2] == layout.BucketMsgs:
				seq, _ := layout.KeySeq(e.Key)
				out[msgKey{p[1], seq}] = stack
			case e.Bucket && len(p) == 1 && p[0] == layout.BucketMessages:
				br, err := boltpage.SubBucket(e.Value)
				if err != nil {
					t.Fatal(err)
				}
				names(p, br, stack)
			case !e.Bucket && len(p) == 2 && p[0] == layout.BucketMessages:
				// The flat layout: the envelope names the session.
				_, seq, _ := layout.SplitMsgKey(e.Key)
				env, err := layout.DecodeEnvelope(e.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[msgKey{env.Session, seq}] = stack
			}
		})
	}
	names(nil, boltpage.BucketRoot{Page: bf.Meta.Root}, nil)
	return out, bf.PageSize
}

// survives reports whether none of a message's pages is damaged.
func survives(spans []pageSpan, damaged func(id uint64) bool) bool {
	for _, s := range spans {
		for id := s.id; id < s.id+s.n; id++ {
			if damaged(id) {
				return false
			}
		}
	}
	return true
}

// TestSalvageDamagedFiles salvages every damaged variant of a store in a child
// process and checks, in the parent, that the child lived, that the source is
// byte-identical afterwards, that every message it recovered is exactly the original
// (right session, seq, epoch, bytes), and that it recovered at least every message
// whose pages from the root down are all intact.
func TestSalvageDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	ts := makeTestStore(t, filepath.Join(dir, "good.db"), 100)
	deps, ps := messagePages(t, ts.path)
	if len(deps) != len(ts.msgs) {
		t.Fatalf("page map has %d messages, store %d", len(deps), len(ts.msgs))
	}
	good, err := os.ReadFile(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range damageCases(good, ps, damageSeed(t, 3), 12) {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(dir, c.name+".db")
			dst := src + ".salvaged"
			if err := os.WriteFile(src, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			before := sha256.Sum256(c.data)
			got := runChild(t, "salvage", src)
			if fileHash(t, src) != before {
				t.Fatal("salvage modified the source")
			}
			if strings.HasPrefix(got, "error ") {
				if _, err := os.Stat(dst); err == nil {
					t.Errorf("failed salvage left %s behind", dst)
				}
				if !c.notBolt && len(c.data) >= 2*ps {
					t.Errorf("salvage failed: %s", got)
				}
				return
			}
			rec := openMessages(t, dst)
			found := checkRecovered(t, ts, rec)
			if c.metaOnly && len(found) != len(ts.msgs) {
				t.Errorf("only meta pages damaged, yet %d of %d messages recovered", len(found), len(ts.msgs))
			}
			want, leafOK := 0, 0
			if c.damagedPage != nil {
				for k, spans := range deps {
					if survives(spans, c.damagedPage) {
						want++
						if _, ok := rec[k]; !ok {
							t.Errorf("message %v, its pages %v all intact, not recovered under its session", k, spans)
						}
					}
					if survives(spans[len(spans)-1:], c.damagedPage) {
						leafOK++
						if !found[k] {
							t.Errorf("message %v, its leaf page %v intact, not recovered", k, spans[len(spans)-1])
						}
					}
				}
			}
			t.Logf("%s: recovered %d of %d (path intact %d, leaf intact %d)", got, len(rec), len(ts.msgs), want, leafOK)
		})
	}
}

// checkRecovered checks that what a salvage recovered is exactly what was stored:
// under its own session, or, for a message whose session was lost, under a
// salvaged-orphans-N session whose messages all come from one original session. It
// returns the original messages found.
func checkRecovered(t *testing.T, ts *testStore, rec map[msgKey]Entry) map[msgKey]bool {
	t.Helper()
	found := map[msgKey]bool{}
	owners := map[string]map[string]bool{} // placeholder -> original sessions that fit all its messages
	for k, e := range rec {
		if !strings.HasPrefix(k.session, "salvaged-orphans-") {
			if want, ok := ts.msgs[k]; !ok || !sameEntry(e, want) {
				t.Errorf("recovered %v differs from the original", k)
			}
			found[k] = true
			continue
		}
		fit := map[string]bool{}
		for orig, want := range ts.msgs {
			e.Session = orig.session
			if orig.seq == k.seq && sameEntry(e, want) {
				fit[orig.session] = true
				found[orig] = true
			}
		}
		if len(fit) == 0 {
			t.Errorf("recovered orphan %v matches no original message", k)
		}
		if o, ok := owners[k.session]; !ok {
			owners[k.session] = fit
		} else {
			for name := range o {
				if !fit[name] {
					delete(o, name)
				}
			}
		}
	}
	for p, o := range owners {
		if len(o) == 0 {
			t.Errorf("%s mixes messages of different sessions", p)
		}
	}
	return found
}

// storeChildRole runs the store-level child roles.
func storeChildRole(role, path string) (string, bool) {
	switch role {
	case "storeopen":
		return childStoreOpen(path), true
	case "append-w":
		return childAppendW(path), true
	case "append-loop":
		return childAppendLoop(path), true
	case "salvage":
		rep, err := Salvage(context.Background(), path, path+".salvaged")
		if err != nil {
			return "error " + oneLine(err.Error()), true
		}
		return fmt.Sprintf("salvaged recovered=%d skipped=%d missing=%d orphans=%d unattributed=%d damage=%d",
			rep.Recovered, rep.Skipped, rep.Missing, rep.Orphans, rep.Unattributed, rep.Damaged), true
	}
	return "", false
}

// TestSalvageCutShortNamesSessions cuts a store file short, losing the newer
// pages, which hold the branch and bucket pages every commit rewrites, while
// older full leaves of messages survive: the envelopes name their session, so
// every recovered message lands in its real session, none in a placeholder.
func TestSalvageCutShortNamesSessions(t *testing.T) {
	dir := t.TempDir()
	ts := makeTestStore(t, filepath.Join(dir, "good.db"), 100)
	good, err := os.ReadFile(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	orphans := 0
	for _, pct := range []int{30, 45, 60, 75} {
		t.Run(fmt.Sprintf("cut-%d%%", pct), func(t *testing.T) {
			src := filepath.Join(dir, fmt.Sprintf("cut-%d.db", pct))
			if err := os.WriteFile(src, good[:len(good)*pct/100], 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Salvage(context.Background(), src, src+".salvaged")
			if err != nil {
				t.Fatal(err)
			}
			rec := openMessages(t, src+".salvaged")
			for k := range rec {
				if strings.HasPrefix(k.session, "salvaged-orphans-") {
					t.Errorf("%v in a placeholder session", k)
				}
			}
			checkRecovered(t, ts, rec)
			if rep.Unattributed != 0 {
				t.Errorf("%d messages unattributed:\n%s", rep.Unattributed, rep)
			}
			orphans += rep.Orphans
			t.Logf("recovered %d of %d, %d from pages the tree no longer reaches", rep.Recovered, len(ts.msgs), rep.Orphans)
		})
	}
	if orphans == 0 {
		t.Error("no cut lost the pages above a surviving leaf: the test tests nothing")
	}
}

// A file of a newer format is not salvaged into this program's format
// (whose readers would misread or drop its records): Salvage refuses it,
// naming the versions, and writes nothing.
func TestSalvageRefusesNewerFormat(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "new.db")
	st, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(t.Context(), "s", Record{Message: ctxstore.NewMessage(ctxstore.RoleUser, "hi"), Tokens: 1}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := bbolt.Open(src, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(layout.BucketStore)).Put([]byte(layout.KeyFormat), []byte(fmt.Sprint(layout.FormatVersion+1)))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out.db")
	rep, err := Salvage(t.Context(), src, dst)
	if err == nil || !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("file format version %d", layout.FormatVersion+1)) {
		t.Fatalf("Salvage of a format %d file: %v, report %+v", layout.FormatVersion+1, err, rep)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("the refused salvage wrote its destination")
	}
}

// TestSalvageStaleMeta: a session's metadata older than its messages (a
// Clear since) or contradicting them is stretched or stepped around, so
// that the import Salvage writes with, which refuses contradictory
// metadata, takes the session: "stale" keeps every message, in epoch 3
// starting at seq 7; "contradicts" loses the one message its metadata
// puts outside its epoch, and keeps the rest.
func TestSalvageStaleMeta(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	write := func(f func(st *Store)) {
		t.Helper()
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f(st)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	raw := func(f func(tx *bbolt.Tx) error) {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, nil)
		must(err)
		must(db.Update(f))
		must(db.Close())
	}
	var metas map[string]layout.Meta
	names := []string{"stale", "contradicts"}
	write(func(st *Store) {
		for _, s := range names {
			_, _, err := st.Append(ctx, s, text("user", "1"), text("assistant", "2"), text("user", "3"))
			must(err)
			_, err = st.Clear(ctx, s)
			must(err)
			_, _, err = st.Append(ctx, s, text("user", "4"), text("assistant", "5"), text("user", "6"))
			must(err)
		}
	})
	metas = map[string]layout.Meta{}
	raw(func(tx *bbolt.Tx) error {
		for _, s := range names {
			_, m, err := getSession(tx, s)
			must(err)
			metas[s] = m
		}
		return nil
	})
	write(func(st *Store) {
		for _, s := range names {
			_, err := st.Clear(ctx, s)
			must(err)
			_, _, err = st.Append(ctx, s, text("user", "7"), text("assistant", "8"))
			must(err)
		}
	})
	// Back to the metadata of before the last Clear; "contradicts" also
	// says epoch 2 starts at seq 5, after its message 4.
	raw(func(tx *bbolt.Tx) error {
		m := metas["contradicts"]
		m.Epochs[0].Last, m.Epochs[1].First, m.EpochSeq = 4, 5, 5
		metas["contradicts"] = m
		for _, s := range names {
			editMeta(t, tx, s, func(cur *layout.Meta) { *cur = metas[s] })
		}
		return nil
	})
	rep, err := Salvage(ctx, path, path+".salvaged")
	must(err)
	for _, s := range rep.Sessions {
		if s.Error != "" {
			t.Errorf("session %q not written: %s", s.Name, s.Error)
		}
	}
	if rep.Recovered != 15 || rep.Skipped != 1 || rep.SkipReasons["message contradicts the session's metadata"] != 1 {
		t.Errorf("recovered %d, skipped %d %v; want 15 recovered, 1 skipped for contradicting its metadata", rep.Recovered, rep.Skipped, rep.SkipReasons)
	}
	st, err := Open(path+".salvaged", Options{ReadOnly: true})
	must(err)
	defer st.Close()
	for _, s := range names {
		si, err := st.Session(ctx, s)
		must(err)
		if si.Epoch != 3 || si.EpochStartSeq != 7 || si.LastSeq != 8 || si.Messages != 2 {
			t.Errorf("%s salvaged as %+v; want epoch 3 from seq 7 to 8, 2 messages", s, si)
		}
	}
	if v, err := st.Verify(ctx); err != nil || !v.Intact() {
		t.Fatalf("the salvaged copy: %v %v", v, err)
	}
}
