package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of the paths that read or copy the file behind a Store's back
// (salvage, compaction) with acknowledged appends still in the log.

// logRecordOffsets returns the offsets of the valid records in the log at
// path; it fails the test when the log has no header.
func logRecordOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(LogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	h, ok, err := wal.DecodeHeader(b)
	if !ok || err != nil {
		t.Fatalf("log of %s: no header (%v)", path, err)
	}
	var offs []int64
	for pos := wal.HeaderSize; pos < len(b); {
		_, size, ok := wal.ParseRecord(b[pos:], h.Gen)
		if !ok {
			break
		}
		offs = append(offs, int64(pos))
		pos += size
	}
	return offs
}

// storeWithLog returns a store whose file holds some messages and whose log
// holds more (left open: Close would apply them), and every message.
func storeWithLog(t *testing.T, path string) (*Store, map[msgKey]Entry) {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The first write commits to the file (and starts the log); Clear
	// is a commit too, applying what the log holds by then.
	if _, _, err := st.Append(ctx, "a", text("user", "in the file 1"), text("assistant", "in the file 2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "b", text("user", "b in the file")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clear(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := st.Append(ctx, "a", text("user", fmt.Sprintf("a in the log %d", i))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Append(ctx, "only-in-log", text("user", fmt.Sprintf("new session %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.Append(ctx, "b", text("user", "b epoch 2, in the log")); err != nil {
		t.Fatal(err)
	}
	if n := len(logRecordOffsets(t, path)); n != 7 {
		t.Fatalf("the log holds %d records, want the 7 appends since the Clear", n)
	}
	return st, allMessages(t, st)
}

func checkSame(t *testing.T, what string, got, want map[msgKey]Entry) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: session %q seq %d missing", what, k.session, k.seq)
		} else if !sameEntry(g, w) {
			t.Errorf("%s: session %q seq %d differs:\n got %+v\nwant %+v", what, k.session, k.seq, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: session %q seq %d should not be there", what, k.session, k.seq)
		}
	}
}

// TestSalvageReadsTheLog: appends acknowledged but only in the log are in the
// salvaged copy, with their seq, epoch, time and tokens, and counted.
func TestSalvageReadsTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	_, want := storeWithLog(t, path)
	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(ctx, path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.FromLog != 7 || rep.Recovered != len(want) || rep.Log != LogPath(path) {
		t.Errorf("want everything recovered, 7 messages from the log; report:\n%s", rep)
	}
	if !strings.Contains(rep.String(), "7 messages recovered from the log") {
		t.Errorf("the report does not say what came from the log:\n%s", rep)
	}
	for _, s := range rep.Sessions {
		if s.Name == "only-in-log" && (s.FromLog != 3 || s.Recovered != 3 || !s.MetaOK) {
			t.Errorf("session only in the log: %+v", s)
		}
	}
	// The copy holds everything by itself: no log beside it, no temporary.
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, ".*"))
	got := append(names, hidden...)
	slices.Sort(got)
	if !slices.Equal(got, []string{dst, path, LogPath(path)}) {
		t.Errorf("files after salvage: %v", got)
	}
	out, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	checkSame(t, "salvaged copy", allMessages(t, out), want)
	if rep, err := out.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("verify of the salvaged copy: %v\n%v", err, rep)
	}
}

// TestSalvageDamagedLog: a damaged record in the middle of the log is
// reported, and the records after it are still recovered.
func TestSalvageDamagedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	st, want := storeWithLog(t, path)
	offs := logRecordOffsets(t, path)
	// The third record is the second append to "a" in the log (seq 4).
	f, err := os.OpenFile(LogPath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XX"), offs[2]+wal.RecHeader+6); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A store reading the log afresh refuses to guess: ErrCorrupt naming
	// the log.
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Session(ctx, "a"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "doctor --salvage") {
		t.Fatalf("reading past a damaged log record: %v", err)
	}
	ro.Close()
	_ = st // still open, as a killed process would have left it
	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(ctx, path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Damaged != 1 || !rep.MissingUnknown || !strings.Contains(strings.Join(rep.Damage, "\n"), "log "+LogPath(path)) {
		t.Errorf("want the log's damage reported; report:\n%s", rep)
	}
	out, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	got := allMessages(t, out)
	lost := msgKey{"a", 4}
	if !strings.Contains(string(want[lost].Raw), "a in the log 1") {
		t.Fatalf("the damaged record is not the one holding seq 4: %s", want[lost].Raw)
	}
	delete(want, lost)
	// Seq 4 is gone, so "a"'s later log messages were appended at the
	// next free seqs of the copy: compare them by content.
	byRaw := func(m map[msgKey]Entry) map[string]string {
		out := map[string]string{}
		for k, e := range m {
			out[k.session+"\x00"+string(e.Raw)] = e.Role
		}
		return out
	}
	g, w := byRaw(got), byRaw(want)
	if len(g) != len(w) {
		t.Errorf("salvaged %d messages, want %d", len(g), len(w))
	}
	for k := range w {
		if _, ok := g[k]; !ok {
			t.Errorf("missing after salvage: %q", k)
		}
	}
	if rep.FromLog != 6 {
		t.Errorf("%d messages from the log, want 6 (7 less the damaged one)", rep.FromLog)
	}
}

// TestSalvageSkipsAppliedLog: a log whose emptying after a checkpoint never
// reached the disk still holds records the file has applied, maybe of a
// session purged since: salvage must not bring them back.
func TestSalvageSkipsAppliedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "keep", text("user", "first")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"keep", "gone", "gone"} {
		if _, _, err := st.Append(ctx, s, text("user", s)); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(LogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, "gone"); err != nil { // applies the log first
		t.Fatal(err)
	}
	want := allMessages(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(LogPath(path), old, 0o600); err != nil { // as if the emptying was lost
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(ctx, path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.FromLog != 0 {
		t.Errorf("want nothing from an applied log; report:\n%s", rep)
	}
	out, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	checkSame(t, "salvaged copy", allMessages(t, out), want)
}

// compactWithLocks runs compactFile as compact-file does: the log's lock,
// then the file's, both exclusive to replace it, shared for a copy.
func compactWithLocks(t *testing.T, path, dst string, replace bool) error {
	t.Helper()
	flag, how := os.O_RDONLY, syscall.LOCK_SH
	if replace {
		flag, how = os.O_RDWR, syscall.LOCK_EX
	}
	log, err := os.OpenFile(LogPath(path), flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := syscall.Flock(int(log.Fd()), how); err != nil {
		t.Fatal(err)
	}
	src, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(src.Fd()), how); err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer os.Remove(tmp)
	return compactFile(ctx, src, log, replace, tmp, func() error { return os.Rename(tmp, dst) })
}

// TestCompactFileTakesTheLog: a compacted copy holds the log's messages, and
// compacting in place leaves a log that continues the new file, also when
// the log belonged to another file (one moved over the path).
func TestCompactFileTakesTheLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	st, want := storeWithLog(t, path)

	out := filepath.Join(dir, "out.db")
	if err := compactWithLocks(t, path, out, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LogPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a log beside the copy: %v", err)
	}
	if n := len(logRecordOffsets(t, path)); n != 7 {
		t.Errorf("a copy changed the original's log: %d records", n)
	}
	c, err := Open(out, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "compacted copy", allMessages(t, c), want)
	c.Close()

	// Another database moved over the path: the log is not its own.
	// In-place compaction leaves it out of the copy and as it is; the
	// first write sets it aside, and nothing of it reaches the new file.
	other := filepath.Join(dir, "other.db")
	o, err := Open(other, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Append(ctx, "other", text("user", "from the other file")); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if err := compactWithLocks(t, path, path, true); err != nil {
		t.Fatal(err)
	}
	if n := len(logRecordOffsets(t, path)); n != 7 {
		t.Errorf("in place over another database: its log has %d records, want the 7 left as they were", n)
	}
	// The store still open on the path had the first database open.
	if _, err := st.Sessions(ctx); !errors.Is(err, ErrMoved) {
		t.Errorf("the store of the moved-over database read the new one: %v", err)
	}
	st.Close()
	re, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if _, _, err := re.Append(ctx, "a", text("user", "after the compaction")); err != nil {
		t.Fatal(err)
	}
	if got := allMessages(t, re); len(got) != 2 {
		t.Errorf("reopened: %d messages, want the other file's and the new one", len(got))
	}
	if aside, _ := filepath.Glob(LogPath(path) + wal.OrphanInfix + "*"); len(aside) != 1 {
		t.Errorf("set-aside logs: %q", aside)
	}
	if rep, err := re.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("verify: %v\n%v", err, rep)
	}
}

// TestCompactFileRefusesDamagedLog: records after a damaged one cannot be
// applied, and a copy without them would drop acknowledged appends.
func TestCompactFileRefusesDamagedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	storeWithLog(t, path)
	offs := logRecordOffsets(t, path)
	f, err := os.OpenFile(LogPath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], 0xdeadbeef)
	if _, err := f.WriteAt(b[:], offs[1]+8); err != nil { // the second record's checksum
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(dir, "out.db")
	err = compactWithLocks(t, path, out, false)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "doctor --salvage") || !strings.Contains(err.Error(), LogPath(path)) {
		t.Errorf("compacting with a damaged log: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a copy was written: %v", err)
	}
}

// copyFile copies src to dst (mode 0600), failing the test on error.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openMessagesRW opens path writable, reads every message, checks the file
// and closes it.
func openMessagesRW(t *testing.T, path string) map[msgKey]Entry {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := allMessages(t, st)
	if rep, err := st.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("verify %s: %v\n%v", path, err, rep)
	}
	return got
}

// TestLogTravelsWithTheFile backs the operator documentation: the file and
// its log copied together hold everything; the file copied alone holds what
// was applied to it (a lost log loses only its own records, and the file
// stays sound); Checkpoint and Close apply the log, after which the file
// alone holds everything.
func TestLogTravelsWithTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	st, want := storeWithLog(t, path)

	both := filepath.Join(dir, "both.db")
	copyFile(t, path, both)
	copyFile(t, LogPath(path), LogPath(both))
	checkSame(t, "file and log copied together", openMessagesRW(t, both), want)

	alone := filepath.Join(dir, "alone.db")
	copyFile(t, path, alone)
	inFile := map[msgKey]Entry{}
	for k, e := range want {
		if k.session != "only-in-log" && !(k.session == "a" && k.seq > 2) && !(k.session == "b" && k.seq > 1) {
			inFile[k] = e
		}
	}
	checkSame(t, "file copied without its log", openMessagesRW(t, alone), inFile)
	// The log it starts continues it: appends and reopening work.
	a, err := Open(alone, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Append(ctx, "a", text("user", "after the log was lost")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if got := openMessagesRW(t, alone); len(got) != len(inFile)+1 {
		t.Errorf("after losing the log and appending: %d messages, want %d", len(got), len(inFile)+1)
	}

	if err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(logRecordOffsets(t, path)); n != 0 {
		t.Errorf("after Checkpoint the log holds %d records", n)
	}
	checkpointed := filepath.Join(dir, "checkpointed.db")
	copyFile(t, path, checkpointed)
	checkSame(t, "file copied alone after Checkpoint", openMessagesRW(t, checkpointed), want)

	if _, _, err := st.Append(ctx, "a", text("user", "in the log again")); err != nil {
		t.Fatal(err)
	}
	want = allMessages(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(logRecordOffsets(t, path)); n != 0 {
		t.Errorf("after Close the log holds %d records", n)
	}
	closed := filepath.Join(dir, "closed.db")
	copyFile(t, path, closed)
	checkSame(t, "file copied alone after Close", openMessagesRW(t, closed), want)
}

// TestSymlinkSharesTheLog: processes naming the file through a symlink and
// directly append to one log; with a log per name, appends made through
// one name were lost when the other's checkpoint moved the file on.
func TestSymlinkSharesTheLog(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.db")
	link := filepath.Join(dir, "link.db")
	a, err := Open(real, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	b, err := Open(link, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range 4 {
		if _, _, err := a.Append(ctx, "s", text("user", fmt.Sprintf("via the file %d", i))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Append(ctx, "s", text("user", fmt.Sprintf("via the link %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(LogPath(link)); err != nil || LogPath(link) != LogPath(real) {
		t.Errorf("log of the link %s, of the file %s (%v)", LogPath(link), LogPath(real), err)
	}
	if _, err := os.Lstat(link + wal.Suffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a log beside the symlink: %v", err)
	}
	if got := openMessagesRW(t, real); len(got) != 8 {
		t.Errorf("%d messages after 8 acknowledged appends", len(got))
	}
}

// TestSalvageLeavesForeignLog: a log of another database found beside the
// file gives the salvaged copy nothing: none of its messages are the file's.
// It is left as it is, and the report says so.
func TestSalvageLeavesForeignLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "src.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "keep", text("user", "first")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, _, err := st.Append(ctx, "keep", text("user", fmt.Sprintf("logged %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(LogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	want := allMessages(t, st)
	if err := st.Close(); err != nil { // applies the log
		t.Fatal(err)
	}
	// The old records under another log id: no longer this file's.
	h, _, _ := wal.DecodeHeader(old)
	h.ID[0] ^= 0xff
	copy(old, h.Encode())
	extra := text("user", "only in the foreign log").Message.Bytes()
	env, err := layout.EncodeEnvelope(&layout.Envelope{Seq: 9, Epoch: 1, Time: 1, Role: "user", Raw: extra, Session: "keep", Tokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	old = wal.EncodeRecord(old, h.Gen, [][]byte{env})
	if err := os.WriteFile(LogPath(path), old, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst.db")
	rep, err := Salvage(ctx, path, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.FromLog != 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "belongs to another database") {
		t.Errorf("want nothing from the foreign log and a note saying why; report:\n%s", rep)
	}
	out, err := Open(dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	checkSame(t, "salvaged copy", allMessages(t, out), want)
	if left, err := os.ReadFile(LogPath(path)); err != nil || string(left) != string(old) {
		t.Errorf("the foreign log was changed (%v)", err)
	}
}

// A session whose messages are all still in the log shows the same creation
// time in every process that reads it, the first message's, and keeps it
// when the log is applied.
func TestLogSessionCreatedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	a, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, _, err := a.Append(ctx, "warm", text("user", "make the log take appends")); err != nil {
		t.Fatal(err)
	}
	var seen SessionInfo
	if _, _, err := a.AppendIf(ctx, "new", func(si SessionInfo) error { seen = si; return nil }, text("user", "first")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + wal.Suffix); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	inA, err := a.Session(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	inB, err := b.Session(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if !inA.Created.Equal(seen.Created) || !inB.Created.Equal(seen.Created) {
		t.Fatalf("created: check saw %v, this process %v, another %v", seen.Created, inA.Created, inB.Created)
	}
	if err := b.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := a.Session(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Created.Equal(seen.Created) {
		t.Fatalf("created after the checkpoint %v, before %v", after.Created, seen.Created)
	}
}

// A log of another database (its file was replaced by another database
// renamed over it) is never applied: the first write sets it aside under a
// name that says whose it is, the file keeps its own messages only, and the
// set-aside log, found again as it was after a crash, is set aside again,
// never applied.
func TestForeignLogSetAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	a, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two", "three"} {
		if _, _, err := a.Append(ctx, "s", text("user", m)); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := os.ReadFile(path + wal.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	o, err := Open(other, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Append(ctx, "s", text("user", "other's own"), text("user", "other's second")); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	// The store that had a.db open: another database is at its path.
	if _, err := a.Sessions(ctx); !errors.Is(err, ErrMoved) {
		t.Fatalf("the old store read the file now at its path: %v", err)
	}
	for round := range 2 {
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Append(ctx, "s", text("user", "third of other")); err != nil {
			t.Fatal(err)
		}
		got := textsOf(t, st, "s")
		if want := []string{"other's own", "other's second", "third of other"}; round == 0 && !slices.Equal(got, want) {
			t.Fatalf("round %d: %q, want %q (nothing of the other log)", round, got, want)
		}
		if slices.Contains(got, "one") {
			t.Fatalf("round %d: the other database's log was applied: %q", round, got)
		}
		st.Close()
		aside, _ := filepath.Glob(path + wal.Suffix + wal.OrphanInfix + "*")
		if len(aside) != round+1 {
			t.Fatalf("round %d: set-aside logs %q", round, aside)
		}
		// As if the set-aside never reached the disk: the log is back.
		if err := os.WriteFile(path+wal.Suffix, saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
}
