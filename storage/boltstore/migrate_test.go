package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/identity"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/export"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"go.etcd.io/bbolt"
)

// writeNested writes the content of the closed format 3 store file src as a
// file of the nested layout at dst, byte for byte what a format 2 build
// keeps: a bucket per session with "meta", "msgs" and "derived", the
// "ctxstore" bucket as it is but for the version, 2.
func writeNested(t testing.TB, src, dst string) {
	t.Helper()
	in, err := bbolt.Open(src, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := bbolt.Open(dst, 0o600, &bbolt.Options{PageSize: layout.PageSize})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = in.View(func(stx *bbolt.Tx) error {
		return out.Update(func(tx *bbolt.Tx) error {
			store, err := tx.CreateBucket([]byte(layout.BucketStore))
			if err != nil {
				return err
			}
			if err := layout.CopyBucket(store, stx.Bucket([]byte(layout.BucketStore))); err != nil {
				return err
			}
			if err := store.Put([]byte(layout.KeyFormat), []byte("2")); err != nil {
				return err
			}
			sessions, err := tx.CreateBucket([]byte(layout.BucketSessions))
			if err != nil {
				return err
			}
			return stx.Bucket([]byte(layout.BucketNames)).ForEach(func(name, rec []byte) error {
				return nestSession(stx, sessions, name, rec)
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// nestSession writes one session of a format 3 file as a bucket of its own.
func nestSession(stx *bbolt.Tx, sessions *bbolt.Bucket, name, rec []byte) error {
	id, meta, err := layout.DecodeRecord(rec)
	if err != nil {
		return err
	}
	sb, err := sessions.CreateBucket(name)
	if err != nil {
		return err
	}
	mv, err := layout.EncodeMeta(&meta)
	if err != nil {
		return err
	}
	if err := sb.Put([]byte(layout.KeyMeta), mv); err != nil {
		return err
	}
	msgs, err := sb.CreateBucket([]byte(layout.BucketMsgs))
	if err != nil {
		return err
	}
	c := stx.Bucket([]byte(layout.BucketMessages)).Cursor()
	p := layout.SessionPrefix(id)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		_, seq, _ := layout.SplitMsgKey(k)
		if err := msgs.Put(layout.SeqKey(seq), v); err != nil {
			return err
		}
	}
	derived, err := sb.CreateBucket([]byte(layout.BucketDerived))
	if err != nil {
		return err
	}
	c = stx.Bucket([]byte(layout.BucketDerivedRecords)).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		_, kind, key, _ := layout.SplitDerivedKey(k)
		kb, err := derived.CreateBucketIfNotExists([]byte(kind))
		if err != nil {
			return err
		}
		if err := kb.Put([]byte(key), v); err != nil {
			return err
		}
	}
	return nil
}

// fillRich gives st sessions of every shape a file holds: several epochs,
// one purged, a purged session's tombstone, pinned system messages, tool
// calls and results, tagged counts, derived records, imported sessions.
func fillRich(t testing.TB, st *Store) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	call, err := ctxstore.ParseMessage([]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`))
	must(err)
	result, err := ctxstore.ParseMessage([]byte(`{"role":"tool","tool_call_id":"c1","content":"42"}`))
	must(err)
	_, _, err = st.Append(ctx, "tools", text("system", "be brief"), text("user", "call f"),
		Record{Message: call, Tokens: 7, Counter: "tiktoken"}, Record{Message: result, Tokens: 2, Counter: "tiktoken"})
	must(err)
	for i := range 3 {
		_, _, err = st.Append(ctx, "epochs", text("user", fmt.Sprint("question ", i)), text("assistant", fmt.Sprint("answer ", i)))
		must(err)
		_, err = st.Clear(ctx, "epochs")
		must(err)
	}
	must(st.PurgeEpoch(ctx, "epochs", 2, nil))
	_, _, err = st.Append(ctx, "gone", text("user", "soon purged"))
	must(err)
	must(st.Purge(ctx, "gone"))
	must(st.PutDerived(ctx, "tools", "summary", "1-4", []byte("a summary")))
	must(st.PutDerived(ctx, "tools", "import", "src", []byte("claimed")))
	must(st.PutDerived(ctx, "derived only", "k", "key", []byte{0, 1, 2}))
	must(st.ImportSessions(ctx, storagetest.SmallSessions(40)))
}

// storeImage is what a user can read of a store: its export, every
// session's metadata, and the derived records of the kinds fillRich writes.
func storeImage(t testing.TB, st *Store) (string, []SessionInfo, []Derived) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := export.Write(ctx, st, &buf, nil); err != nil {
		t.Fatal(err)
	}
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ds []Derived
	for _, si := range infos {
		for _, kind := range []string{"summary", "import", "k"} {
			for d, err := range st.ListDerived(ctx, si.Name, kind) {
				if err != nil {
					t.Fatal(err)
				}
				ds = append(ds, d)
			}
		}
	}
	return buf.String(), infos, ds
}

func storedFormat(t testing.TB, path string) string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	_ = db.View(func(tx *bbolt.Tx) error {
		v = string(tx.Bucket([]byte(layout.BucketStore)).Get([]byte(layout.KeyFormat)))
		if identity.Nested(tx) {
			v += " nested"
		}
		return nil
	})
	return v
}

// nestedFixture writes a store of every shape (fillRich) and the same as a
// file of format 2 at dir/old.db, and returns that path and what a user
// can read of the store.
func nestedFixture(t testing.TB, dir string) (old, export string, infos []SessionInfo, derived []Derived) {
	t.Helper()
	src := filepath.Join(dir, "src.db")
	old = filepath.Join(dir, "old.db")
	st, err := Open(src, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fillRich(t, st)
	export, infos, derived = storeImage(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	writeNested(t, src, old)
	if got := storedFormat(t, old); got != "2 nested" {
		t.Fatalf("fixture is format %q", got)
	}
	return old, export, infos, derived
}

// A file of format 2 is upgraded by the first Open that may write: every
// session, message, epoch, tombstone and derived record comes through, the
// export is the same bytes, Verify finds nothing, and appends continue.
// A read-only Open refuses it, saying how to upgrade it.
func TestMigrateFormat2(t *testing.T) {
	dir := t.TempDir()
	old, wantExport, wantInfos, wantDerived := nestedFixture(t, dir)
	if _, err := Open(old, Options{ReadOnly: true}); !errors.Is(err, ErrNeedsUpgrade) {
		t.Fatalf("read-only open of a format 2 file: %v", err)
	}
	st, err := Open(old, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := storedFormat(t, old); got != strconv.Itoa(layout.FormatVersion) {
		t.Fatalf("after the upgrade the file is format %q", got)
	}
	gotExport, gotInfos, gotDerived := storeImage(t, st)
	if gotExport != wantExport {
		t.Errorf("export after the upgrade differs:\n%s\n---\n%s", gotExport, wantExport)
	}
	if !reflect.DeepEqual(gotInfos, wantInfos) {
		t.Errorf("sessions after the upgrade differ:\n%+v\n---\n%+v", gotInfos, wantInfos)
	}
	if !reflect.DeepEqual(gotDerived, wantDerived) || len(wantDerived) != 3 {
		t.Errorf("derived records after the upgrade:\n%+v\n---\n%+v", gotDerived, wantDerived)
	}
	r, err := st.Verify(ctx)
	if err != nil || !r.OK() {
		t.Fatalf("verify after the upgrade: %v\n%s", err, r)
	}
	// Appends continue each session's numbers; a purged name continues
	// after its tombstone.
	for name, want := range map[string]uint64{"tools": 5, "epochs": 7, "gone": 2, "chat-000003": 3} {
		first, _, err := st.Append(ctx, name, text("user", "after the upgrade"))
		if err != nil || first != want {
			t.Errorf("append to %q after the upgrade: seq %d, %v; want %d", name, first, err, want)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".old.db*")); len(leftovers) != 0 {
		t.Errorf("the upgrade left %v", leftovers)
	}
}

// Appends acknowledged but only in the log of a format 2 file are in the
// upgraded file, and the log is left continuing it.
func TestMigrateKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	src, old := filepath.Join(dir, "src.db"), filepath.Join(dir, "old.db")
	st, want := storeWithLog(t, src)
	cp := filepath.Join(dir, "copy.db")
	copyStore(t, src, cp) // the file and its log as a crash leaves them
	st.Close()
	writeNested(t, cp, old)
	copyFile(t, LogPath(cp), LogPath(old))
	if n := len(logRecordOffsets(t, old)); n != 7 {
		t.Fatalf("the format 2 file's log holds %d records", n)
	}
	st2, err := Open(old, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	checkSame(t, "after the upgrade", allMessages(t, st2), want)
	if n := len(logRecordOffsets(t, old)); n != 0 {
		t.Errorf("the log holds %d records after the upgrade applied them", n)
	}
	if _, _, err := st2.Append(ctx, "a", text("user", "after")); err != nil {
		t.Fatal(err)
	}
	st2.Close()
	st3, err := Open(old, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st3.Close()
	if got := len(allMessages(t, st3)); got != len(want)+1 {
		t.Errorf("after reopening: %d messages, want %d", got, len(want)+1)
	}
}

// Shrink upgrades a format 2 file too: in place, or into a new file.
func TestShrinkUpgrades(t *testing.T) {
	dir := t.TempDir()
	old, want, _, _ := nestedFixture(t, dir)
	into := filepath.Join(dir, "into.db")
	if err := Shrink(ctx, old, into, ShrinkOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Shrink(ctx, old, "", ShrinkOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{into, old} {
		if got := storedFormat(t, path); got != strconv.Itoa(layout.FormatVersion) {
			t.Errorf("%s after shrink: format %q", path, got)
		}
		st, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := storeImage(t, st); got != want {
			t.Errorf("%s: export after shrink differs", path)
		}
		st.Close()
	}
}

// childUpgrader opens the store at path for writing, which upgrades a file
// of format 2, and prints "upgraded".
func childUpgrader(path string) error {
	st, err := Open(path, Options{})
	if err != nil {
		return err
	}
	fmt.Println("upgraded")
	return st.Close()
}

// An upgrade SIGKILLed at any moment leaves the format 2 file and its log
// as they were, or the upgraded file complete: the next Open (which
// finishes the upgrade if need be) reads every message, acknowledged
// appends of the log included, and the same export, and the temporary copy
// does not outlive it.
func TestMigrateCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := 16
	if os.Getenv("CTXSTORE_SOAK") != "" {
		kills = 200
	}
	dir := t.TempDir()
	src, fixture := filepath.Join(dir, "src.db"), filepath.Join(dir, "fixture.db")
	st, _ := storeWithLog(t, src)
	fillRich(t, st)
	// Enough sessions that the copy takes a while.
	for batch := range slices.Chunk(storagetest.SmallSessions(4040)[40:], 1000) {
		if err := st.ImportSessions(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, _, err := st.Append(ctx, "a", text("user", fmt.Sprint("last in the log ", i))); err != nil {
			t.Fatal(err)
		}
	}
	want := allMessages(t, st)
	wantExport, _, _ := storeImage(t, st)
	cp := filepath.Join(dir, "copy.db")
	copyStore(t, src, cp)
	st.Close()
	writeNested(t, cp, fixture)
	copyFile(t, LogPath(cp), LogPath(fixture))
	if len(logRecordOffsets(t, fixture)) == 0 {
		t.Fatal("the fixture's log holds no records")
	}

	// How long an upgrade takes, start to end, on this machine now.
	path := filepath.Join(dir, "run", "store.db")
	fresh := func() {
		os.RemoveAll(filepath.Dir(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		copyStore(t, fixture, path)
	}
	fresh()
	t0 := time.Now()
	if out, err := child(t, "upgrader", path, "").Output(); err != nil || string(out) != "upgraded\n" {
		t.Fatalf("upgrade: %v: %s", err, out)
	}
	whole := time.Since(t0)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22))
	outcomes := map[string]int{}
	for k := range kills {
		fresh()
		cmd := child(t, "upgrader", path, "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Spread over the whole run, start-up included, and as long
		// again: a run under load takes longer than the one timed.
		step := 2 * whole / time.Duration(kills)
		delay := step*time.Duration(k) + time.Duration(r.Int64N(int64(step)+1))
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		format := storedFormat(t, path)
		outcomes[format]++
		switch format {
		case "2 nested":
			if n := len(logRecordOffsets(t, path)); n != len(logRecordOffsets(t, fixture)) {
				t.Fatalf("kill %d (after %v): the old file's log holds %d records, had %d", k, delay, n, len(logRecordOffsets(t, fixture)))
			}
		case strconv.Itoa(layout.FormatVersion):
		default:
			t.Fatalf("kill %d (after %v): the file is format %q", k, delay, format)
		}
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("kill %d (after %v, format %s): open: %v", k, delay, format, err)
		}
		checkSame(t, fmt.Sprintf("kill %d (after %v, format %s)", k, delay, format), allMessages(t, st), want)
		if got, _, _ := storeImage(t, st); got != wantExport {
			t.Fatalf("kill %d (after %v, format %s): the export differs", k, delay, format)
		}
		st.Close()
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
			t.Fatalf("kill %d: left behind: %v", k, left)
		}
	}
	t.Logf("upgrade %v; files found after the kills: %v", whole, outcomes)
}

// A backup of format 2 restores as an upgraded file, the backup left as
// it was.
func TestRestoreOldBackup(t *testing.T) {
	dir := t.TempDir()
	old, want, _, _ := nestedFixture(t, dir)
	path := filepath.Join(dir, "restored.db")
	if _, err := Restore(ctx, path, old); err != nil {
		t.Fatal(err)
	}
	if got := storedFormat(t, old); got != "2 nested" {
		t.Errorf("the backup is now format %q", got)
	}
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, _, _ := storeImage(t, st); got != want {
		t.Errorf("the restored file's export differs")
	}
}
