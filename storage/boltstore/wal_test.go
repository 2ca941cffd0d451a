package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
)

// Tests of the write-ahead log (wal.go, tail.go, logwrite.go): kills at
// random moments, power loss at every sync point, damaged logs, several
// processes at once.

// walOp is one acknowledged write, as a child reports it on stdout (one line,
// String's format) and as the checks expect to find it.
type walOp struct {
	kind        byte // 'A' Append or AppendIf, 'R' ReplaceEpoch, 'C' Clear, 'D' PutDerived
	session     string
	epoch       uint64 // R, C: the new epoch
	first, last uint64 // A, R
	sum         uint32 // A, R: crc32 of the records' bytes; D: of the value
	tag         string // A, R: the tag every record's text starts with; D: the key
}

// String is the line a child prints for o.
func (o walOp) String() string {
	return fmt.Sprintf("%c %s %d %d %d %d %s", o.kind, o.session, o.epoch, o.first, o.last, o.sum, o.tag)
}

// parseWALOp reads a line String wrote.
func parseWALOp(line string) (walOp, bool) {
	var o walOp
	var kind string
	if _, err := fmt.Sscan(line, &kind, &o.session, &o.epoch, &o.first, &o.last, &o.sum, &o.tag); err != nil || len(kind) != 1 {
		return walOp{}, false
	}
	o.kind = kind[0]
	return o, true
}

// walRecs makes n records tagged tag: "<tag> j/n <body>", bodies of random
// length up to maxBody.
func walRecs(r *rand.Rand, tag string, n, maxBody int) []Record {
	recs := make([]Record, n)
	for j := range recs {
		body := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(maxBody+1))
		recs[j] = Record{Message: ctxstore.NewMessage("user", fmt.Sprintf("%s %d/%d %s", tag, j, n, body)), Tokens: j + 1}
	}
	return recs
}

// recsSum is the checksum of the records' bytes, as stored (Entry.Raw).
func recsSum(recs []Record) uint32 {
	var s uint32
	for _, r := range recs {
		s = crc32.Update(s, crc32.IEEETable, r.Message.Bytes())
	}
	return s
}

func entriesSum(es []Entry) uint32 {
	var s uint32
	for _, e := range es {
		s = crc32.Update(s, crc32.IEEETable, e.Raw)
	}
	return s
}

// errStale refuses an AppendIf whose session moved since it was read.
var errStale = errors.New("session moved")

// walWriter does random writes to sessions a, b and c and reports each
// acknowledged one with ack (before the next write begins): appends of 1-3
// records, conditional appends expecting the last seq just read,
// ReplaceEpoch, Clear, PutDerived and explicit checkpoints.
type walWriter struct {
	s       *Store
	r       *rand.Rand
	prefix  string // tag prefix: unique to the writer
	maxBody int
	op      int
}

func (w *walWriter) step(ctx context.Context, ack func(walOp) error) error {
	w.op++
	sess := []string{"a", "b", "c"}[w.r.IntN(3)]
	tag := fmt.Sprintf("%s-o%d", w.prefix, w.op)
	maxBody := w.maxBody
	if maxBody > 0 && w.r.IntN(10) == 0 {
		maxBody = 40 << 10 // a record of several pages, which a kill can cut
	}
	recs := walRecs(w.r, tag, 1+w.r.IntN(3), maxBody)
	switch k := w.r.IntN(40); {
	case k < 22:
		first, last, err := w.s.Append(ctx, sess, recs...)
		if err != nil {
			return fmt.Errorf("append: %w", err)
		}
		return ack(walOp{kind: 'A', session: sess, first: first, last: last, sum: recsSum(recs), tag: tag})
	case k < 32:
		info, err := w.s.Session(ctx, sess)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("session: %w", err)
		}
		want := info.LastSeq
		first, last, err := w.s.AppendIf(ctx, sess, func(si SessionInfo) error {
			if si.LastSeq != want {
				return errStale
			}
			return nil
		}, recs...)
		if errors.Is(err, errStale) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("append if: %w", err)
		}
		if first != want+1 {
			return fmt.Errorf("AppendIf expecting last seq %d stored at %d", want, first)
		}
		return ack(walOp{kind: 'A', session: sess, first: first, last: last, sum: recsSum(recs), tag: tag})
	case k < 34:
		epoch, first, last, err := w.s.ReplaceEpoch(ctx, sess, nil, recs...)
		if err != nil {
			return fmt.Errorf("replace epoch: %w", err)
		}
		return ack(walOp{kind: 'R', session: sess, epoch: epoch, first: first, last: last, sum: recsSum(recs), tag: tag})
	case k < 36:
		epoch, err := w.s.Clear(ctx, sess)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("clear: %w", err)
		}
		return ack(walOp{kind: 'C', session: sess, epoch: epoch, tag: "-"})
	case k < 38:
		v := []byte(tag + strings.Repeat("v", w.r.IntN(200)))
		if err := w.s.PutDerived(ctx, sess, "k", tag, v); err != nil {
			return fmt.Errorf("put derived: %w", err)
		}
		return ack(walOp{kind: 'D', session: sess, sum: crc32.ChecksumIEEE(v), tag: tag})
	default:
		if err := w.s.Checkpoint(ctx); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	}
}

// childWALWriter (arg "logBytes logMessages seed maxBody") writes with a
// walWriter until killed, printing each acknowledged write on stdout
// (unbuffered: a printed line is an acknowledged write), after "open" once
// the store is open.
func childWALWriter(path, arg string) error {
	var logBytes int64
	var logMessages, maxBody int
	var seed uint64
	if _, err := fmt.Sscan(arg, &logBytes, &logMessages, &seed, &maxBody); err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	s.wlog.MaxBytes, s.wlog.MaxMessages = logBytes, logMessages
	fmt.Println("open")
	w := &walWriter{s: s, r: rand.New(rand.NewPCG(seed, uint64(os.Getpid()))), prefix: fmt.Sprintf("p%d", os.Getpid()), maxBody: maxBody}
	ack := func(o walOp) error {
		_, err := fmt.Println(o)
		return err
	}
	for {
		if err := w.step(context.Background(), ack); err != nil {
			return err
		}
	}
}

// walTag splits a record's text "<tag> j/n ..." of walRecs.
func walTag(text string) (tag string, j, n int, ok bool) {
	tag, rest, found := strings.Cut(text, " ")
	if !found {
		return "", 0, 0, false
	}
	if _, err := fmt.Sscanf(rest, "%d/%d", &j, &n); err != nil {
		return "", 0, 0, false
	}
	return tag, j, n, true
}

// checkWALStore opens the store at path the way a fresh process would and
// checks it against the acknowledged writes: Verify finds nothing; every
// session's seqs run 1..LastSeq over its epochs without a gap; every write
// (acknowledged or not) is there whole or not at all, and once; every
// acknowledged one is there with its bytes. A read-only check leaves the
// log as it is (for the next process to replay); a writable one applies it
// (Verify checkpoints), without syncing: the checks test what the file
// holds, not the disk. It returns the number of messages.
func checkWALStore(t *testing.T, path string, acked []walOp, readOnly bool) int {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && len(acked) == 0 {
		return 0 // killed before it created the file
	}
	st, err := Open(path, Options{ReadOnly: readOnly, NoSync: !readOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() {
		t.Fatalf("verify: %v", rep.Problems)
	}
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bySession := map[string][]Entry{}
	epochs := map[string][]uint64{}
	groups := map[string][]Entry{}
	total := 0
	for _, si := range infos {
		var all []Entry
		for _, ep := range si.Epochs {
			epochs[si.Name] = append(epochs[si.Name], ep.Epoch)
			es := collect(t, st.EpochMessages(ctx, si.Name, ep.Epoch, 0))
			if len(es) != ep.Messages {
				t.Fatalf("session %s epoch %d: %d messages, metadata says %d", si.Name, ep.Epoch, len(es), ep.Messages)
			}
			all = append(all, es...)
		}
		for i, e := range all {
			if e.Seq != uint64(i+1) {
				t.Fatalf("session %s: entry %d has seq %d: gap or disorder", si.Name, i, e.Seq)
			}
			m, err := e.Message()
			if err != nil {
				t.Fatalf("session %s seq %d: %v", si.Name, e.Seq, err)
			}
			tag, _, _, ok := walTag(m.Text())
			if !ok {
				t.Fatalf("session %s seq %d: untagged %.60q", si.Name, e.Seq, m.Text())
			}
			groups[tag] = append(groups[tag], e)
		}
		if si.LastSeq != uint64(len(all)) {
			t.Fatalf("session %s: last seq %d, %d messages", si.Name, si.LastSeq, len(all))
		}
		bySession[si.Name] = all
		total += len(all)
	}
	for tag, es := range groups {
		m, _ := es[0].Message()
		_, _, n, _ := walTag(m.Text())
		if len(es) != n {
			t.Fatalf("write %s: %d of its %d records stored (partial or doubled)", tag, len(es), n)
		}
		for j, e := range es {
			m, _ := e.Message()
			_, jj, _, _ := walTag(m.Text())
			if jj != j || e.Seq != es[0].Seq+uint64(j) || e.Epoch != es[0].Epoch || e.Session != es[0].Session {
				t.Fatalf("write %s: record %d is part %d at %s seq %d epoch %d", tag, j, jj, e.Session, e.Seq, e.Epoch)
			}
		}
	}
	for _, o := range acked {
		switch o.kind {
		case 'A', 'R':
			all := bySession[o.session]
			if o.first == 0 || o.last < o.first || o.last > uint64(len(all)) {
				t.Fatalf("acknowledged %v: session %s holds %d messages", o, o.session, len(all))
			}
			es := all[o.first-1 : o.last]
			for _, e := range es {
				m, _ := e.Message()
				if tag, _, _, _ := walTag(m.Text()); tag != o.tag || (o.kind == 'R' && e.Epoch != o.epoch) {
					t.Fatalf("acknowledged %v: seq %d holds %.40q (epoch %d)", o, e.Seq, m.Text(), e.Epoch)
				}
			}
			if entriesSum(es) != o.sum {
				t.Fatalf("acknowledged %v: stored bytes differ", o)
			}
		case 'C':
			if !slices.Contains(epochs[o.session], o.epoch) {
				t.Fatalf("acknowledged %v: session %s has epochs %v", o, o.session, epochs[o.session])
			}
		case 'D':
			v, err := st.GetDerived(ctx, o.session, "k", o.tag)
			if err != nil || crc32.ChecksumIEEE(v) != o.sum {
				t.Fatalf("acknowledged %v: derived %q, %v", o, v, err)
			}
		}
	}
	return total
}

// walKill runs writer children on path at once, one per arg, and SIGKILLs
// each after its delay. It returns the writes they acknowledged and how
// many had opened the store (said so) when they were killed.
func walKill(t *testing.T, path string, args []string, delays []time.Duration) ([]walOp, int) {
	t.Helper()
	type run struct {
		cmd    *exec.Cmd
		acked  []walOp
		opened bool
		done   chan struct{}
	}
	runs := make([]*run, len(args))
	for i, arg := range args {
		cmd := child(t, "wal-writer", path, arg)
		_, out := testkit.Start(t, cmd) // the writer reads no stdin
		rn := &run{cmd: cmd, done: make(chan struct{})}
		runs[i] = rn
		go func() {
			defer close(rn.done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if o, ok := parseWALOp(sc.Text()); ok {
					rn.acked = append(rn.acked, o)
				}
				rn.opened = rn.opened || sc.Text() == "open"
			}
		}()
		time.AfterFunc(delays[i], func() { cmd.Process.Signal(syscall.SIGKILL) })
	}
	var acked []walOp
	opened := 0
	for _, rn := range runs {
		<-rn.done
		err := rn.cmd.Wait()
		if ws, ok := rn.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("writer ended without the signal: %v", err)
		}
		acked = append(acked, rn.acked...)
		if rn.opened {
			opened++
		}
	}
	return acked, opened
}

// copyStore copies the store file and its log (if any) from src to dst.
func copyStore(t testing.TB, src, dst string) {
	t.Helper()
	for _, suf := range []string{"", wal.Suffix} {
		b, err := os.ReadFile(src + suf)
		if errors.Is(err, os.ErrNotExist) && suf != "" {
			os.Remove(dst + suf)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suf, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Writer processes (appends, conditional appends, ReplaceEpoch, Clear,
// PutDerived, checkpoints every few appends) are SIGKILLed at random
// moments; then every acknowledged write is there once with its bytes,
// nothing is partial, Verify is clean. Some kills land while a process
// applies (replays) a large log left by another. CTXSTORE_SOAK=1 makes it
// 1,000 random kills and 50 during replay.
func TestWALCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills, replayKills, perFile := 24, 6, 1000 // perFile: rounds
	if os.Getenv("CTXSTORE_SOAK") != "" {
		kills, replayKills, perFile = 1000, 50, 25
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 13))
	var path string
	var acked []walOp
	k, rounds, together, totalAcked, msgs := 0, 0, 0, 0, 0
	for k < kills {
		if rounds%perFile == 0 { // a fresh file now and then keeps the checks short
			path = filepath.Join(dir, fmt.Sprintf("crash-%d.db", rounds))
			acked = nil
		}
		rounds++
		// One to three writers at once, each killed at its own moment.
		// Checkpoints every 2-12 messages or 4-20 KiB: a process is often
		// killed while it applies the log to bbolt.
		var args []string
		var delays []time.Duration
		for range 1 + r.IntN(3) {
			args = append(args, fmt.Sprintf("%d %d %d %d", 4096+r.IntN(16384), 2+r.IntN(10), r.Uint64(), 1500))
			delays = append(delays, time.Duration(r.IntN(200))*time.Millisecond)
		}
		if len(args) > 1 {
			together++
		}
		got, _ := walKill(t, path, args, delays)
		k += len(args)
		acked = append(acked, got...)
		totalAcked += len(got)
		msgs = checkWALStore(t, path, acked, true)
	}
	// A writable open checkpoints whatever the last one left in the log.
	checkWALStore(t, path, acked, false)
	t.Logf("%d kills in %d rounds (%d with several writers at once), %d acknowledged writes, %d messages in the last file", k, rounds, together, totalAcked, msgs)

	// A log of 20,000 messages that no process applied yet, then writer
	// processes with low limits, whose first write applies it, killed at
	// random moments of their start.
	big := filepath.Join(dir, "big.db")
	st, err := Open(big, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.wlog.MaxBytes, st.wlog.MaxMessages = 1<<30, 1<<30
	var bigAcked []walOp
	w := &walWriter{s: st, r: rand.New(rand.NewPCG(seed, 14)), prefix: "big"}
	for i := range 2000 {
		tag := fmt.Sprintf("big-%d", i)
		recs := walRecs(w.r, tag, 10, 60)
		first, last, err := st.Append(ctx, []string{"a", "b", "c"}[i%3], recs...)
		if err != nil {
			t.Fatal(err)
		}
		bigAcked = append(bigAcked, walOp{kind: 'A', session: []string{"a", "b", "c"}[i%3], first: first, last: last, sum: recsSum(recs), tag: tag})
	}
	saved := filepath.Join(dir, "big-saved.db")
	copyStore(t, big, saved) // before Close, which would apply the log
	st.Close()
	fi, err := os.Stat(saved + wal.Suffix)
	if err != nil || fi.Size() < 1<<20 {
		t.Fatalf("the log to replay: %v, %v", fi, err)
	}
	// How long a writer takes to apply it and acknowledge its first write.
	work := filepath.Join(dir, "replay.db")
	copyStore(t, saved, work)
	arg := fmt.Sprintf("%d %d %d %d", 8192, 4, r.Uint64(), 500)
	var until time.Duration
	{
		cmd := child(t, "wal-writer", work, arg)
		start := time.Now()
		_, out := testkit.Start(t, cmd) // the writer reads no stdin
		sc := bufio.NewScanner(out)
		for until == 0 && sc.Scan() {
			if _, ok := parseWALOp(sc.Text()); ok {
				until = time.Since(start)
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if until == 0 {
			t.Fatal("the writer acknowledged nothing")
		}
	}
	opened, replayed := 0, 0
	for range replayKills {
		copyStore(t, saved, work)
		delay := time.Duration(r.Int64N(int64(until) * 5 / 4))
		got, open := walKill(t, work, []string{arg}, []time.Duration{delay})
		opened += open
		if len(got) > 0 {
			replayed++
		}
		checkWALStore(t, work, append(slices.Clip(bigAcked), got...), true)
	}
	checkWALStore(t, work, bigAcked, false)
	t.Logf("%d kills of processes starting on a %d-byte log (%v to their first write): %d once the store was open, %d of them after the first write", replayKills, fi.Size(), until, opened, replayed)
}

// walChildRole runs the TestStoreChild roles of this file; ok is false for
// a role it does not know.
func walChildRole(role, path, arg string) (ok bool, err error) {
	switch role {
	case "wal-writer":
		return true, childWALWriter(path, arg)
	case "wal-mp-writer":
		return true, childWALMPWriter(path, arg)
	case "wal-watcher":
		return true, childWALWatcher(path, arg)
	}
	return false, nil
}

// Power loss: every sync point (the log's fdatasync, each bbolt
// commit) is a moment the disk may be left at. A copy of the file and its
// log taken at each one must open as a store holding every write
// acknowledged before it, with Verify clean, and go on taking writes. At the
// commits that applied the log, the copies also try the log's reset half
// done: the old header with the old records (the reset did not reach the
// disk), the new header over the old records (the truncation did not), and
// the old header with the records cut off (the header did not).
func TestWALPowerLoss(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.wlog.MaxMessages = 7 // a checkpoint every few appends
	type snap struct {
		path   string
		acked  int  // writes acknowledged when it was taken
		commit bool // taken at a bbolt commit
	}
	var snaps []snap
	var acked []walOp
	var lastApplied wal.Applied
	st.wlog.Synced = func() {
		p := filepath.Join(dir, fmt.Sprintf("snap-%d.db", len(snaps)))
		copyStore(t, path, p)
		// A commit that applied the log moved bbolt's record of how far
		// it is applied; one beside the log (derived records) did not,
		// and does not reset the log.
		applied, _ := fileIdentity(t, p)
		snaps = append(snaps, snap{path: p, acked: len(acked), commit: applied != lastApplied})
		lastApplied = applied
	}
	w := &walWriter{s: st, r: rand.New(rand.NewPCG(7, 8)), prefix: "w", maxBody: 300}
	ack := func(o walOp) error { acked = append(acked, o); return nil }
	for range 100 {
		if err := w.step(ctx, ack); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st.wlog.Synced = nil
	variants := 0
	reopen := func(t *testing.T, p string, acked []walOp) {
		t.Helper()
		checkWALStore(t, p, acked, true)
		// The store goes on: writes, then another process sees it all
		// (and applies the log).
		s, err := Open(p, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := &walWriter{s: s, r: rand.New(rand.NewPCG(uint64(len(p)), 9)), prefix: "after"}
		more := slices.Clip(acked)
		// An append first: the write that meets the log as the crash
		// left it.
		recs := walRecs(w.r, "after-first", 2, 50)
		first, last, err := s.Append(ctx, "a", recs...)
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, walOp{kind: 'A', session: "a", first: first, last: last, sum: recsSum(recs), tag: "after-first"})
		logWhole(t, p)
		for range 3 {
			if err := w.step(ctx, func(o walOp) error { more = append(more, o); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		logWhole(t, p)
		checkWALStore(t, p, more, false)
		variants++
	}
	commits := 0
	for i, sn := range snaps {
		t.Run(fmt.Sprintf("sync-%d", i), func(t *testing.T) {
			// Read before reopen changes them.
			db, err := os.ReadFile(sn.path)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := os.ReadFile(sn.path + wal.Suffix)
			reopen(t, sn.path, acked[:sn.acked])
			if !sn.commit || err != nil || len(lb) <= wal.HeaderSize {
				return
			}
			commits++
			h, ok, err := wal.DecodeHeader(lb)
			if !ok || err != nil {
				t.Fatalf("log header: %v", err)
			}
			next := wal.Header{ID: h.ID, Gen: h.Gen + 1}.Encode()
			for _, v := range []struct {
				name string
				log  []byte
			}{
				{"new-header-old-records", append(slices.Clip(next), lb[wal.HeaderSize:]...)},
				{"old-header-no-records", lb[:wal.HeaderSize]},
			} {
				p := filepath.Join(dir, fmt.Sprintf("snap-%d-%s.db", i, v.name))
				if err := os.WriteFile(p, db, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p+wal.Suffix, v.log, 0o600); err != nil {
					t.Fatal(err)
				}
				reopen(t, p, acked[:sn.acked])
			}
		})
	}
	if commits < 5 || len(snaps) < 80 {
		t.Fatalf("%d sync points, %d of them commits applying a log: too few to test anything", len(snaps), commits)
	}
	t.Logf("%d writes, %d sync points (%d commits applying the log), %d copies opened", len(acked), len(snaps), commits, variants)
}

// logWhole fails unless the log at path is its header followed by whole
// records of its generation: no stale record, no hole.
func logWhole(t *testing.T, path string) {
	t.Helper()
	if lb, err := os.ReadFile(path + wal.Suffix); err == nil && len(lb) > wal.HeaderSize {
		if sp := walSpans(t, lb); len(sp) == 0 || sp[len(sp)-1].off+sp[len(sp)-1].size != len(lb) {
			t.Fatalf("the log (%d bytes) holds records %v", len(lb), sp)
		}
	}
}

// walFixture is a store whose log holds records no checkpoint applied yet.
type walFixture struct {
	db, log []byte
	recs    []walSpan // the log's records
	texts   []string  // every message, in order (session "s")
	last    int       // messages in the last record
}

// walSpan is one record's place in the log.
type walSpan struct{ off, size int }

// walSpans lists the valid records of a log from its start.
func walSpans(t testing.TB, log []byte) []walSpan {
	t.Helper()
	h, ok, err := wal.DecodeHeader(log)
	if !ok || err != nil {
		t.Fatalf("log header: %v", err)
	}
	var out []walSpan
	for off := wal.HeaderSize; off < len(log); {
		_, size, ok := wal.ParseRecord(log[off:], h.Gen)
		if !ok {
			break
		}
		out = append(out, walSpan{off, size})
		off += size
	}
	return out
}

// makeWALFixture writes a store with n appends to session "s": the first
// goes to bbolt (it creates the log), the others to the log; the last one
// holds three messages. The files are copied while the store is open (Close
// would apply the log).
func makeWALFixture(t testing.TB, n int) *walFixture {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "fix.db")
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fx := &walFixture{}
	for i := range n {
		var recs []Record
		for j := range 1 + 2*(i/(n-1)) {
			body := 20 + i*7%50
			if i == n-1 {
				body = 3 // short: the torn-tail test cuts it at every byte
			}
			s := fmt.Sprintf("m%d.%d %s", i, j, strings.Repeat("x", body))
			recs = append(recs, text("user", s))
			fx.texts = append(fx.texts, s)
		}
		fx.last = len(recs)
		if _, _, err := st.Append(ctx, "s", recs...); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The first in the file, the others in the log.
			if err := st.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fx.db, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if fx.log, err = os.ReadFile(path + wal.Suffix); err != nil {
		t.Fatal(err)
	}
	fx.recs = walSpans(t, fx.log)
	if len(fx.recs) != n-1 || fx.recs[len(fx.recs)-1].off+fx.recs[len(fx.recs)-1].size != len(fx.log) {
		t.Fatalf("fixture log holds %d records, want %d", len(fx.recs), n-1)
	}
	return fx
}

// write puts the fixture's file and log (as given) at path.
func (fx *walFixture) write(t testing.TB, path string, log []byte) {
	t.Helper()
	if err := os.WriteFile(path, fx.db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+wal.Suffix, log, 0o600); err != nil {
		t.Fatal(err)
	}
}

func textsOf(t testing.TB, st *Store, session string) []string {
	t.Helper()
	var out []string
	for _, e := range collect(t, st.Messages(ctx, session, 0)) {
		m, err := e.Message()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Text())
	}
	return out
}

// The last record cut at every byte (a write cut short by a crash):
// readers see the records before it and never part of it, and leave the
// log as it is; the next append follows the last whole record, and a fresh
// process then sees exactly the earlier messages and the new one.
func TestWALTornTail(t *testing.T) {
	fx := makeWALFixture(t, 6)
	lastRec := fx.recs[len(fx.recs)-1]
	before := fx.texts[:len(fx.texts)-fx.last]
	dir := t.TempDir()
	for cut := lastRec.off; cut < len(fx.log); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut-%d.db", cut))
		// Written, not yet synced, when the crash came: the header says
		// the log is synced up to the record before.
		cutLog := withSynced(fx.log[:cut], lastRec.off)
		fx.write(t, path, cutLog)
		ro, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := textsOf(t, ro, "s"); !slices.Equal(got, before) {
			t.Fatalf("cut at %d: a reader sees %q, want %q", cut, got, before)
		}
		if info, err := ro.Session(ctx, "s"); err != nil || info.LastSeq != uint64(len(before)) {
			t.Fatalf("cut at %d: session %+v, %v", cut, info, err)
		}
		ro.Close()
		if b, _ := os.ReadFile(path + wal.Suffix); !bytes.Equal(b, cutLog) {
			t.Fatalf("cut at %d: a read-only reader changed the log", cut)
		}
		st, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := st.Append(ctx, "s", text("user", "after the cut"))
		if err != nil || first != uint64(len(before)+1) {
			t.Fatalf("cut at %d: append after the torn record: seq %d, %v", cut, first, err)
		}
		// Another process (a second Store) reads the log as left.
		other, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		want := append(slices.Clip(before), "after the cut")
		if got := textsOf(t, other, "s"); !slices.Equal(got, want) {
			t.Fatalf("cut at %d: after the append a reader sees %q, want %q", cut, got, want)
		}
		other.Close()
		st.Close()
		if cut%16 == 0 || cut == len(fx.log)-1 {
			checkLogIntact(t, path, want)
		}
	}
	t.Logf("%d cuts of a %d-byte record", len(fx.log)-lastRec.off, lastRec.size)
}

// withSynced returns a copy of log whose header says it is synced up to off
// (and no sync is in progress).
func withSynced(log []byte, off int) []byte {
	b := slices.Clone(log)
	binary.LittleEndian.PutUint64(b[wal.SyncedAt:], uint64(off))
	binary.LittleEndian.PutUint64(b[wal.SyncingAt:], uint64(off))
	return b
}

// checkLogIntact opens path afresh: Verify clean, session "s" holds want.
func checkLogIntact(t *testing.T, path string, want []string) {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rep, err := st.Verify(ctx); err != nil || !rep.Intact() {
		t.Fatalf("verify: %v %v", rep, err)
	}
	if got := textsOf(t, st, "s"); !slices.Equal(got, want) {
		t.Fatalf("after reopening: %q, want %q", got, want)
	}
}

// checkLogCorrupt runs the store's calls, read-only and writable, on a store
// whose log is damaged: each must come back with ErrCorrupt naming the log
// (and wantMsg), Verify must report the damage as a "log" problem, and
// nothing may change either file.
func checkLogCorrupt(t *testing.T, path, wantMsg string) {
	t.Helper()
	db0, _ := os.ReadFile(path)
	log0, _ := os.ReadFile(path + wal.Suffix)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path+wal.Suffix) || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("%s: %v; want ErrCorrupt naming %s and %q", what, err, path+wal.Suffix, wantMsg)
		}
	}
	for _, ro := range []bool{true, false} {
		st, err := Open(path, Options{ReadOnly: ro, LockTimeout: time.Second})
		if err != nil {
			check("open", err)
			continue
		}
		_, err = st.Sessions(ctx)
		check("sessions", err)
		_, err = st.Session(ctx, "s")
		check("session", err)
		for _, err := range st.Messages(ctx, "s", 0) {
			check("messages", err)
		}
		_, err = st.Tail(ctx, "s", 3)
		check("tail", err)
		if !ro {
			_, _, err = st.Append(ctx, "s", text("user", "x"))
			check("append", err)
			_, _, err = st.AppendIf(ctx, "s", func(SessionInfo) error { return nil }, text("user", "x"))
			check("append if", err)
			_, err = st.Clear(ctx, "s")
			check("clear", err)
			check("checkpoint", st.Checkpoint(ctx))
		}
		rep, err := st.Verify(ctx)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if rep.Intact() || !strings.Contains(fmt.Sprint(rep.Problems), "log") {
			t.Fatalf("verify (read-only %v) does not report the log: %v", ro, rep.Problems)
		}
		if err := st.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	if db, _ := os.ReadFile(path); !bytes.Equal(db, db0) {
		t.Fatal("the store file changed")
	}
	if log, _ := os.ReadFile(path + wal.Suffix); !bytes.Equal(log, log0) {
		t.Fatal("the log changed")
	}
}

// A flipped byte in a record followed by valid ones is damage, not a
// torn write: every call fails with ErrCorrupt naming the log and the
// record's offset, Verify reports it, nothing is skipped silently and
// nothing is rewritten.
func TestWALDamagedRecord(t *testing.T) {
	fx := makeWALFixture(t, 5)
	dir := t.TempDir()
	n := 0
	for ri, rec := range fx.recs[:len(fx.recs)-1] {
		// The record's magic, length, checksum, count, first layout.Envelope's
		// length, and bytes of its envelopes.
		for _, at := range []int{0, 5, 9, 12, 16, 20, rec.size / 2, rec.size - 1} {
			for _, flip := range []byte{0x01, 0x80, 0xff} {
				log := bytes.Clone(fx.log)
				log[rec.off+at] ^= flip
				path := filepath.Join(dir, fmt.Sprintf("r%d-%d-%x.db", ri, at, flip))
				fx.write(t, path, log)
				checkLogCorrupt(t, path, fmt.Sprintf("offset %d", rec.off))
				n++
			}
		}
	}
	t.Logf("%d damaged logs", n)
}

// A log whose header is garbage or fails its checksum, whose header
// is zeros with records after it, or that is a directory or a symlink:
// calls fail with an error naming the log (never a crash), and
// nothing is rewritten. A header of zeros alone (the log of a store created
// when the crash came before its header reached the disk) is an empty log.
func TestWALBadHeader(t *testing.T) {
	fx := makeWALFixture(t, 4)
	dir := t.TempDir()
	garbage := bytes.Clone(fx.log)
	for i := range wal.HeaderSize {
		garbage[i] = byte(i*37 + 11)
	}
	zeroed := bytes.Clone(fx.log)
	clear(zeroed[:wal.HeaderSize])
	badSum := bytes.Clone(fx.log)
	badSum[20] ^= 1
	for _, c := range []struct {
		name, msg string
		log       []byte
	}{
		{"garbage", "bad magic", garbage},
		{"zeros-then-records", "bad magic", zeroed},
		{"checksum", "checksum", badSum},
		{"garbage-header-only", "bad magic", garbage[:wal.HeaderSize]},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".db")
			fx.write(t, path, c.log)
			checkLogCorrupt(t, path, c.msg)
		})
	}
	t.Run("zeros-only", func(t *testing.T) {
		path := filepath.Join(dir, "zeros.db")
		fx.write(t, path, make([]byte, wal.HeaderSize))
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		first := fx.texts[:1] // bbolt holds the first append only
		if got := textsOf(t, st, "s"); !slices.Equal(got, first) {
			t.Fatalf("messages %q, want %q", got, first)
		}
		appendText(t, st, "s", "next")
		st.Close()
		checkLogIntact(t, path, append(slices.Clip(first), "next"))
	})
	for _, kind := range []string{"directory", "symlink-to-text", "symlink-to-nothing", "symlink-to-log"} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(dir, kind+".db")
			if err := os.WriteFile(path, fx.db, 0o600); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, kind+"-target")
			switch kind {
			case "directory":
				if err := os.Mkdir(path+wal.Suffix, 0o700); err != nil {
					t.Fatal(err)
				}
			case "symlink-to-text":
				if err := os.WriteFile(target, []byte("notes\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			case "symlink-to-log":
				if err := os.WriteFile(target, fx.log, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if kind != "directory" {
				if err := os.Symlink(target, path+wal.Suffix); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(target)
			for _, ro := range []bool{true, false} {
				st, err := Open(path, Options{ReadOnly: ro, LockTimeout: time.Second})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				_, err = st.Sessions(ctx)
				if err == nil || !strings.Contains(err.Error(), path+wal.Suffix) {
					t.Fatalf("read-only %v: sessions: %v; want an error naming the log", ro, err)
				}
				if !ro {
					_, _, err = st.Append(ctx, "s", text("user", "x"))
					if err == nil || !strings.Contains(err.Error(), path+wal.Suffix) {
						t.Fatalf("append: %v; want an error naming the log", err)
					}
				}
				if _, err := st.Verify(ctx); err == nil {
					t.Fatalf("read-only %v: verify succeeded", ro)
				}
				st.Close()
			}
			after, err := os.ReadFile(target)
			if kind == "symlink-to-nothing" {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the symlink's target was created: %v", err)
				}
			} else if !bytes.Equal(before, after) {
				t.Fatal("the symlink's target changed")
			}
			if db, _ := os.ReadFile(path); !bytes.Equal(db, fx.db) {
				t.Fatal("the store file changed")
			}
		})
	}
}

// FuzzLog: any bytes as the log beside a valid store never panic; every
// call returns data or an error; a read-only store leaves the log as it
// is; an append that succeeds is then read back.
func FuzzLog(f *testing.F) {
	fx := makeWALFixture(f, 4)
	f.Add(fx.log)
	f.Add(fx.log[:len(fx.log)-3])
	f.Add(fx.log[:wal.HeaderSize])
	f.Add(fx.log[:wal.HeaderSize-1])
	f.Add(append(slices.Clip(fx.log), fx.log[fx.recs[0].off:fx.recs[1].off]...)) // a record repeated
	f.Add(append(slices.Clip(fx.log[:fx.recs[0].off]), fx.log[fx.recs[1].off:]...))
	damaged := bytes.Clone(fx.log)
	damaged[fx.recs[0].off+15] ^= 4
	f.Add(damaged)
	f.Add(make([]byte, wal.HeaderSize))
	f.Add([]byte{})
	other := bytes.Clone(fx.log) // another store's log: adopted
	h, _, _ := wal.DecodeHeader(other)
	h.ID[0] ^= 1
	copy(other, h.Encode())
	f.Add(other)
	f.Fuzz(func(t *testing.T, log []byte) {
		path := filepath.Join(t.TempDir(), "f.db")
		fx.write(t, path, log)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drain := func(st *Store) {
			if _, err := st.Sessions(cctx); err != nil {
				return
			}
			for _, name := range []string{"s", "t"} {
				for _, err := range st.Messages(cctx, name, 0) {
					if err != nil {
						break
					}
				}
				st.Tail(cctx, name, 2)
				st.Get(cctx, name, 1, 2)
			}
		}
		ro, err := Open(path, Options{ReadOnly: true, LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		drain(ro)
		ro.Verify(cctx)
		ro.Close()
		if b, _ := os.ReadFile(path + wal.Suffix); !bytes.Equal(b, log) {
			t.Fatal("a read-only store changed the log")
		}
		st, err := Open(path, Options{NoSync: true, LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		drain(st)
		if first, _, err := st.Append(cctx, "t", text("user", "fuzz")); err == nil {
			got, err := st.Get(cctx, "t", first)
			if err != nil || len(got) != 1 {
				t.Fatalf("an acknowledged append (seq %d) reads back as %v, %v", first, got, err)
			}
			if m, _ := got[0].Message(); m.Text() != "fuzz" {
				t.Fatalf("seq %d reads back as %q", first, m.Text())
			}
		}
		st.Verify(cctx)
		drain(st)
	})
}

// childWALMPWriter (arg "id n logMessages") makes n writes: appends to
// session "shared" (half of them conditional on the last seq it just read,
// retried when another writer got in first) and to its own session "own-id".
// Every message is "w<id>-<i>"; it prints "shared|own seq text" for each.
func childWALMPWriter(path, arg string) error {
	var id, n, logMessages int
	if _, err := fmt.Sscan(arg, &id, &n, &logMessages); err != nil {
		return err
	}
	s, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	s.wlog.MaxMessages = logMessages
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	ctx := context.Background()
	retries := 0
	for i := range n {
		msg := fmt.Sprintf("w%d-%d", id, i)
		sess := "shared"
		if i%3 == 2 {
			sess = fmt.Sprintf("own-%d", id)
		}
		var first uint64
		if i%2 == 0 || sess != "shared" {
			if first, _, err = s.Append(ctx, sess, text("user", msg)); err != nil {
				return err
			}
		} else {
			for {
				info, err := s.Session(ctx, sess)
				if err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				first, _, err = s.AppendIf(ctx, sess, func(si SessionInfo) error {
					if si.LastSeq != info.LastSeq {
						return errStale
					}
					return nil
				}, text("user", msg))
				if errors.Is(err, errStale) {
					retries++
					continue
				}
				if err != nil {
					return err
				}
				if first != info.LastSeq+1 {
					return fmt.Errorf("AppendIf expecting last seq %d stored at %d", info.LastSeq, first)
				}
				break
			}
		}
		fmt.Fprintf(out, "%s %d %s\n", sess, first, msg)
	}
	fmt.Fprintf(os.Stderr, "writer %d: %d conditional appends retried\n", id, retries)
	return nil
}

// childWALWatcher (arg: total messages) follows every session with Watch,
// reading each one's new messages when told of a change, until it has seen
// them all; it prints "session seq text" for each.
func childWALWatcher(path, arg string) error {
	want, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	s, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := s.Watch(ctx, "")
	if err != nil {
		return err
	}
	fmt.Println("watching")
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	next := map[string]uint64{}
	seen := 0
	read := func(session string) error {
		for e, err := range s.Messages(ctx, session, next[session]) {
			if err != nil {
				return err
			}
			m, err := e.Message()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s %d %s\n", session, e.Seq, m.Text())
			next[session] = e.Seq + 1
			seen++
		}
		return nil
	}
	for seen < want {
		select {
		case c, ok := <-ch:
			if !ok {
				return fmt.Errorf("watch ended having seen %d of %d messages", seen, want)
			}
			if err := read(c.Session); err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("saw %d of %d messages", seen, want)
		}
	}
	return nil
}

// Four writer processes append to one session (half of the appends
// conditional) and each to a session of its own, with checkpoints every few
// appends, while a reader process follows every session with Watch: every
// acknowledged append is stored once, each writer's in its order, each
// conditional append landed right after the seq it expected, and the reader
// saw every message of every session, in order.
func TestWALProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const writers, each = 4, 240
	path := filepath.Join(t.TempDir(), "mp.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	watcher := child(t, "wal-watcher", path, strconv.Itoa(writers*each))
	_, wout := testkit.Start(t, watcher) // the watcher reads no stdin
	wr := bufio.NewReader(wout)
	if line, _ := wr.ReadString('\n'); line != "watching\n" {
		t.Fatalf("watcher said %q", line)
	}
	var watched bytes.Buffer
	watchDone := make(chan error, 1)
	go func() { _, err := io.Copy(&watched, wr); watchDone <- err }()
	var cmds []*exec.Cmd
	outs := make([]*bytes.Buffer, writers)
	for w := range writers {
		c := child(t, "wal-mp-writer", path, fmt.Sprintf("%d %d %d", w, each, 3+w*4))
		outs[w] = &bytes.Buffer{}
		c.Stdout = outs[w]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	if err := watcher.Wait(); err != nil {
		t.Fatalf("watcher: %v", err)
	}
	<-watchDone

	stored := map[string][]string{}
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	infos, err := st.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, si := range infos {
		es := collect(t, st.Messages(ctx, si.Name, 0))
		for i, e := range es {
			m, _ := e.Message()
			if e.Seq != uint64(i+1) {
				t.Fatalf("session %s: entry %d has seq %d", si.Name, i, e.Seq)
			}
			stored[si.Name] = append(stored[si.Name], m.Text())
		}
	}
	total := 0
	for w, out := range outs {
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != each {
			t.Fatalf("writer %d acknowledged %d appends, want %d", w, len(lines), each)
		}
		last := map[string]uint64{}
		for _, line := range lines {
			var sess, msg string
			var seq uint64
			if _, err := fmt.Sscan(line, &sess, &seq, &msg); err != nil {
				t.Fatalf("writer %d: %q", w, line)
			}
			if seq <= last[sess] {
				t.Fatalf("writer %d: %s at seq %d after its seq %d", w, msg, seq, last[sess])
			}
			last[sess] = seq
			if got := stored[sess]; seq > uint64(len(got)) || got[seq-1] != msg {
				t.Fatalf("writer %d: acknowledged %s at %s seq %d, not stored there", w, msg, sess, seq)
			}
		}
		total += len(lines)
	}
	n := 0
	for _, texts := range stored {
		n += len(texts)
	}
	if n != total {
		t.Fatalf("%d messages stored, %d acknowledged", n, total)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(watched.String()), "\n") {
		var sess, msg string
		var seq uint64
		if _, err := fmt.Sscan(line, &sess, &seq, &msg); err != nil {
			t.Fatalf("watcher: %q", line)
		}
		if seq != uint64(len(got[sess])+1) {
			t.Fatalf("watcher saw %s seq %d after %d messages", sess, seq, len(got[sess]))
		}
		got[sess] = append(got[sess], msg)
	}
	for sess, texts := range stored {
		if !slices.Equal(got[sess], texts) {
			t.Fatalf("session %s: the watcher saw %d messages, %d stored", sess, len(got[sess]), len(texts))
		}
	}
	if rep, err := st.Verify(ctx); err != nil || !rep.Intact() {
		t.Fatalf("verify: %v %v", rep, err)
	}
}

// Bytes a killed writer left at the log's end are cut off by the next
// append, which writes its record where they were: a sync begun before that
// record was written (here one that an older version announced up to the
// end of those bytes, and another process's sync in flight) must not count
// for it.
func TestWALSyncAnnouncedPastTornBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	a, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendText(t, a, "s", "first")  // creates the log
	appendText(t, a, "s", "second") // in the log, synced
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lf, err := os.OpenFile(path+wal.Suffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	// A sync announced by a process (of a version that announced them)
	// that died in it.
	_, synced, _, err := wal.SyncWords(lf)
	if err != nil {
		t.Fatal(err)
	}
	wal.WriteWord(lf, wal.SyncingAt, synced+1)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var syncs []time.Time
	note := func() {
		mu.Lock()
		syncs = append(syncs, time.Now())
		mu.Unlock()
	}
	a.wlog.Synced = func() {
		close(entered)
		<-release
		a.wlog.Synced = nil
	}
	b.wlog.Synced = note
	aDone := make(chan error, 1)
	go func() { _, _, err := a.Append(ctx, "s", text("user", "waits")); aDone <- err }()
	time.Sleep(25 * time.Millisecond)
	// A writer killed half-way through a large record.
	fi, _ := lf.Stat()
	if _, err := lf.WriteAt(bytes.Repeat([]byte{0xA5}, 8192), fi.Size()); err != nil {
		t.Fatal(err)
	}
	<-entered // a's sync, announced up to the end of those bytes, is done
	start := time.Now()
	bDone := make(chan error, 1)
	go func() { _, _, err := b.Append(ctx, "s", text("user", "third")); bDone <- err }()
	time.Sleep(20 * time.Millisecond)
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(syncs, start.Before) {
		t.Fatal("an append was acknowledged with no sync begun after it was written")
	}
}

// Damaged data pages under a log that holds records (appends since the
// last checkpoint): every call, in a child process, comes back with nil or
// ErrCorrupt (never a crash), and a salvage of each variant completes and
// recovers the log's messages.
func TestDamagedPagesWithLog(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	goodPath := filepath.Join(dir, "good.db")
	makeTestStore(t, goodPath, 60)
	st, err := Open(goodPath, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		appendText(t, st, testSessions[i%2], fmt.Sprintf("in the log %d", i))
	}
	saved := filepath.Join(dir, "saved.db")
	copyStore(t, goodPath, saved) // before Close applies the log
	st.Close()
	good, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(saved + wal.Suffix)
	if err != nil || len(walSpans(t, log)) != 12 {
		t.Fatalf("the log: %d bytes, %v", len(log), err)
	}
	bf, err := boltpage.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	meta, ps := bf.Meta, bf.PageSize
	bf.Close()
	var data []int
	for id := uint64(2); id < meta.HWM; id++ {
		if id != meta.Root && id != meta.Freelist {
			data = append(data, int(id))
		}
	}
	variants := 8
	if os.Getenv("CTXSTORE_SOAK") != "" {
		variants = 80
	}
	rng := rand.New(rand.NewPCG(damageSeed(t, 31), 32))
	for i := range variants {
		d := bytes.Clone(good)
		id := data[rng.IntN(len(data))]
		for j := id * ps; j < (id+1)*ps; j++ {
			d[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("garbage-%d-page-%d", i, id)
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".db")
			for _, f := range []struct {
				path string
				b    []byte
			}{{p, d}, {p + wal.Suffix, log}, {p + ".2", d}, {p + ".2" + wal.Suffix, log}} {
				if err := os.WriteFile(f.path, f.b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got := runChild(t, "api-ops", p)
			if strings.Contains(got, "=other:") {
				t.Errorf("a call failed with something other than ErrCorrupt: %s", got)
			}
			got = runChild(t, "salvage", p+".2")
			if !strings.HasPrefix(got, "salvaged ") {
				t.Fatalf("salvage: %s", got)
			}
			rec := openMessages(t, p+".2.salvaged")
			n := 0
			for _, e := range rec {
				if m, _ := e.Message(); strings.HasPrefix(m.Text(), "in the log ") {
					n++
				}
			}
			if n != 12 {
				t.Errorf("salvage recovered %d of the log's 12 messages: %s", n, got)
			}
			t.Log(got)
		})
	}
}

// After a power cut, writes that were never synced may have reached the
// disk in part and out of order: a record with a hole (zeros, a whole
// sector or less) or stale bytes, followed by a later record that did reach
// it. The header says how far the log was synced; nothing past that was
// acknowledged, so bad bytes there read as a torn tail, cut off by the next
// writer. Before it, the same bytes are damage to synced records: an
// error, and the log is left as it is for salvage.
func TestWALTornPastSyncedDamagedBefore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("sector ", 400) // ~2.8 KiB: spans whole sectors
	for i := range 4 {
		if _, _, err := st.Append(ctx, "s", text("user", fmt.Sprintf("%d %s", i, big))); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := st.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Kill-like: no Close, so the records stay in the log only.
	log, err := os.ReadFile(path + wal.Suffix)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The first message went to bbolt; the log holds messages 2, 3, 4.
	spans := walSpans(t, log)
	if len(spans) != 3 {
		t.Fatalf("the log holds %d records, want 3", len(spans))
	}
	third := spans[1].off
	sector := (third+511)/512*512 + 512
	cases := []struct {
		name   string
		synced int // the header's synced word
		damage func(b []byte)
		torn   bool
	}{
		{"whole zero sector past synced", third, func(b []byte) { clear(b[sector : sector+512]) }, true},
		{"short zero run past synced", third, func(b []byte) { clear(b[third+40 : third+140]) }, true},
		{"stale bytes past synced", third, func(b []byte) { b[third+100] ^= 0xff }, true},
		{"whole zero sector before synced", len(log), func(b []byte) { clear(b[sector : sector+512]) }, false},
		{"flipped byte before synced", len(log), func(b []byte) { b[third+100] ^= 0xff }, false},
		{"log shorter than synced", len(log) + 100, func([]byte) {}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := withSynced(log, c.synced)
			c.damage(b)
			cp := filepath.Join(t.TempDir(), "copy.db")
			if err := os.WriteFile(cp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cp+wal.Suffix, b, 0o600); err != nil {
				t.Fatal(err)
			}
			st2, err := Open(cp, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			_, _, aerr := st2.Append(ctx, "s", text("user", "after"))
			si, serr := st2.Session(ctx, "s")
			if !c.torn {
				if !errors.Is(aerr, ErrCorrupt) || !errors.Is(serr, ErrCorrupt) {
					t.Fatalf("damage to synced records: append err %v, read err %v; want ErrCorrupt", aerr, serr)
				}
				if got, err := os.ReadFile(cp + wal.Suffix); err != nil || !bytes.Equal(got, b) {
					t.Fatalf("the damaged log was changed (%v): it must stay for salvage", err)
				}
				return
			}
			if aerr != nil || serr != nil {
				t.Fatalf("a torn tail past the synced mark read as damage: append %v, read %v", aerr, serr)
			}
			if si.LastSeq != 3 {
				t.Fatalf("last seq %d, want 3 (two messages, then the append after the cut)", si.LastSeq)
			}
		})
	}
}
