package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/pause"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/filelock"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/wal"
	"go.etcd.io/bbolt"
)

// The tail: what the log holds beyond the bbolt file, as this process last
// read it. Every operation takes the log's lock (shared to read, exclusive to
// write), brings the tail up to date from the files (catchUp), and then reads
// bbolt and the tail together. A tailState is never changed once published:
// catching up builds a new one, so a reader can keep using the one it got.

// tailMode says how the log relates to the bbolt file at the path.
type tailMode int

const (
	tailEmpty  tailMode = iota // no log yet (or one never written): nothing beyond bbolt
	tailNormal                 // the log continues the bbolt file
	tailOrphan                 // the log does not continue the file: a writer sets it aside
	// tailStale: an older generation of this file's log, every record of
	// it applied (a power cut kept a header that later checkpoints had
	// replaced, unsynced): nothing beyond bbolt; a writer empties it.
	tailStale
)

// tailState is the overlay of the log on the bbolt file.
type tailState struct {
	// What it was built from: a change in any of them means the bbolt file
	// changed (a commit, or another file at the path) and the state is
	// rebuilt.
	dbIno, dbDev uint64
	txid         uint64
	// held, if not 0, is the open of the bbolt file (Store.dbOpens) that
	// this process held, and so locked against every other writer,
	// from before txid was read: while it is still held, txid is still
	// the file's (this process's own commits forget or advance the tails).
	held   uint64
	hdr    wal.Header
	hasHdr bool

	applied    wal.Applied // what bbolt says it holds of the log
	hasApplied bool
	mode       tailMode
	off        int64 // offset after the last record read
	torn       bool  // bytes after off that are no valid record
	// sessions holds every session the log touches, as bbolt plus the log
	// make it, and sessions loaded from bbolt to check a write against.
	sessions map[string]*tailSession
	orphan   [][][]byte // tailOrphan: the records set aside
	// foreign (tailOrphan) says the log is another database's: it is
	// never read, so damage in it (its own database's to salvage) is not
	// this file's; a writer sets it aside.
	foreign  bool
	messages int
	bytes    int64
}

// tailSession is one session as the bbolt file plus the log make it.
type tailSession struct {
	meta   layout.Meta
	exists bool      // in bbolt or in the log; false: how it would be created
	recs   []tailRec // the log's messages of the session, by seq
}

// tailRec is one message in the log: its seq and its layout.Envelope, encoded as
// bbolt stores it.
type tailRec struct {
	seq uint64
	val []byte
}

// records reports whether the log holds anything bbolt does not.
func (t *tailState) records() bool {
	return t != nil && (t.messages > 0 || len(t.orphan) > 0)
}

// session returns the session's overlay, or nil if the tail knows nothing
// about it (then bbolt alone is right).
func (t *tailState) session(name string) *tailSession {
	if t == nil {
		return nil
	}
	return t.sessions[name]
}

// recsFrom returns the session's log records with seq >= seq.
func (ts *tailSession) recsFrom(seq uint64) []tailRec {
	i := sort.Search(len(ts.recs), func(i int) bool { return ts.recs[i].seq >= seq })
	return ts.recs[i:]
}

// walLock takes the log's lock, exclusive or shared, for this process and
// against other processes, waiting at most LockTimeout. The returned func
// releases it. It fails with ErrClosed once Close has begun.
func (s *Store) walLock(ctx context.Context, exclusive bool) (func(), error) {
	if s.walClosed.Load() {
		return nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	unlock, err := s.lockLog(ctx, exclusive)
	if err == nil && s.walClosed.Load() {
		// Close began while this waited: it set the flag under the
		// same lock, so looking again under it is final.
		unlock()
		return nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
	}
	return unlock, err
}

// lockLog is walLock for the syncs of appends already written, which Close
// waits for: they still take the lock while Close is under way.
func (s *Store) lockLog(ctx context.Context, exclusive bool) (func(), error) {
	if exclusive {
		s.walMu.Lock()
		h, err := s.lockCurrentLog(ctx, syscall.LOCK_EX)
		if err != nil {
			s.walMu.Unlock()
			return nil, err
		}
		return func() {
			h.release()
			s.walMu.Unlock()
		}, nil
	}
	s.walMu.RLock()
	s.shMu.Lock()
	if s.shRefs == 0 {
		h, err := s.lockCurrentLog(ctx, syscall.LOCK_SH)
		if err != nil {
			s.shMu.Unlock()
			s.walMu.RUnlock()
			return nil, err
		}
		s.shHeld = h
	}
	s.shRefs++
	s.shMu.Unlock()
	return func() {
		s.shMu.Lock()
		if s.shRefs--; s.shRefs == 0 {
			s.shHeld.release()
			s.shHeld = heldLock{}
		}
		s.shMu.Unlock()
		s.walMu.RUnlock()
	}, nil
}

// lockCurrentLog takes the log's flock how on the log now at the path: a log
// moved over it before or while this waited (ctxstore's tools replace it
// holding the lock) is opened and locked instead, so that nothing is written
// to a log no longer at the path. The one check, after locking, covers a log
// replaced before it too. Callers hold walMu as walFile needs.
func (s *Store) lockCurrentLog(ctx context.Context, how int) (heldLock, error) {
	for try := 0; ; try++ {
		f, err := s.walFile(try > 0)
		if err != nil || f == nil {
			return heldLock{}, err
		}
		h, err := s.flockLog(ctx, f, how)
		if err != nil {
			return heldLock{}, err
		}
		// Another database's log found here is not judged yet: only once
		// catchUp has seen that the file at the path is still the
		// database this Store opened does a writer set it aside (it
		// reads as tailOrphan). A Store whose file was replaced must not
		// set aside the log of the database now there, which holds
		// appends acknowledged to that database's users.
		same, err := s.walAtPath()
		if err != nil || same || try == 3 {
			// Not replaced, or cannot tell, or replaced again and again:
			// what the caller reads next says which log it has.
			return h, nil
		}
		h.release()
	}
}

// walFile returns the open log, reopening it if check and the log at the
// path is not the one open (removed or replaced), or nil if there is none (a read-only
// store of a file never written by a version with a log). Callers hold walMu
// exclusively, or shared with shMu and no shared lock taken.
func (s *Store) walFile(check bool) (*os.File, error) {
	if s.walClosed.Load() {
		// Close is waiting for syncs in flight: they use the log open
		// now, and nothing opens it again.
		if s.walF == nil {
			return nil, fmt.Errorf("store %s: %w", s.path, ErrClosed)
		}
		return s.walF, nil
	}
	if s.walF != nil && check {
		if same, err := s.walAtPath(); err != nil || !same {
			s.walF.Close()
			s.walF = nil
		}
	}
	if s.walF != nil {
		return s.walF, nil
	}
	flag := os.O_RDWR | os.O_CREATE
	if s.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	// Not through a symlink: the log is written to, and a symlink could
	// point it at any file (or create one where it points).
	f, err := os.OpenFile(s.walPath, flag&^os.O_CREATE|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) && !s.opts.ReadOnly {
		f, err = os.OpenFile(s.walPath, flag|os.O_EXCL|syscall.O_NOFOLLOW, s.walMode())
		if err == nil {
			if oerr := matchOwner(f, s.path); oerr != nil {
				f.Close()
				return nil, fmt.Errorf("store %s: log: %w", s.path, oerr)
			}
		}
		if errors.Is(err, os.ErrExist) {
			// Another process created it meanwhile.
			f, err = os.OpenFile(s.walPath, flag&^os.O_CREATE|syscall.O_NOFOLLOW, 0)
		}
	}
	switch {
	case err == nil:
		fi, serr := f.Stat()
		if serr != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("store %s: log %s: not a regular file", s.path, s.walPath)
		}
		if fi.Size() < wal.HeaderSize && !s.opts.ReadOnly {
			// Never written: its creator may have died before syncing
			// the directory. Sync it before any record is acknowledged.
			if derr := syncDir(filepath.Dir(s.walPath)); derr != nil {
				f.Close()
				return nil, fmt.Errorf("store %s: log %s: sync its directory: %w", s.path, s.walPath, derr)
			}
		}
		dev, ino, kerr := inodeOf(s.walPath, fi)
		if kerr != nil {
			f.Close()
			return nil, fmt.Errorf("store %s: log %s: %w", s.path, s.walPath, kerr)
		}
		s.walF, s.walKey = f, fileKey{dev, ino}
		return f, nil
	case s.opts.ReadOnly && errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("store %s: log %s is a symlink: it must be a regular file beside the store file", s.path, s.walPath)
	default:
		return nil, fmt.Errorf("store %s: log: %w", s.path, err)
	}
}

// walMode is the mode of a new log: the bbolt file's, so whoever may read
// or write the one may do the same with the other.
func (s *Store) walMode() os.FileMode {
	if fi, err := os.Stat(s.path); err == nil {
		return fi.Mode().Perm() & 0o666
	}
	return fileMode
}

// heldLock is a flock held on the log: on the Store's own descriptor, or on
// one opened to wait for the lock in the kernel (closed to let go).
type heldLock struct {
	f       *os.File
	private bool
}

func (h heldLock) release() {
	switch {
	case h.f == nil:
	case h.private:
		h.f.Close()
	default:
		filelock.Unlock(h.f)
	}
}

// flockLog takes the log's flock how (LOCK_SH or LOCK_EX), on f when it is
// free. When it is busy, it waits at most LockTimeout in the kernel, through
// a descriptor of its own (filelock.Waiter), which holds the lock for the caller:
// the waiter wakes the moment the holder lets go. The lock is held for
// microseconds at a time (syncs run after it is released), so a poll
// would mostly sleep past the moment it came free, and each of several
// processes appending together would lose that time on every append.
func (s *Store) flockLog(ctx context.Context, f *os.File, how int) (heldLock, error) {
	var timer *time.Timer
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return heldLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return heldLock{}, fmt.Errorf("store %s: lock the log: %w", s.path, err)
		}
		if err := ctx.Err(); err != nil {
			// Nothing to wait with (tryLog): start no attempt.
			return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", s.path, err)
		}
		if timer == nil {
			timer = time.NewTimer(s.opts.LockTimeout)
			defer timer.Stop()
		}
		w := &s.logWait[0]
		if how == syscall.LOCK_EX {
			w = &s.logWait[1]
		}
		g, err := w.Wait(ctx, timer.C, func() (*os.File, error) {
			g, err := os.OpenFile(s.walPath, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return nil, err
			}
			if err := filelock.Retry(g, how); err != nil {
				g.Close()
				return nil, err
			}
			return g, nil
		})
		switch {
		case errors.Is(err, filelock.ErrTimeout):
			return heldLock{}, fmt.Errorf("store %s: %w: another process held the log for %v", s.path, ErrLocked, s.opts.LockTimeout)
		case ctx.Err() != nil:
			if err == nil {
				g.Close()
			}
			return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", s.path, ctx.Err())
		case err != nil:
			// The log cannot be opened by its name (removed, replaced by
			// something else): wait on f itself, a short while at a time.
			if err := pause.For(ctx, 100*time.Microsecond); err != nil {
				return heldLock{}, fmt.Errorf("store %s: waiting for the log's lock: %w", s.path, err)
			}
			continue
		}
		if same, serr := sameDescriptor(f, g); serr == nil && same {
			return heldLock{f: g, private: true}, nil
		}
		// Another log was moved to the path: a lock on it is no lock on
		// f. Try f again.
		g.Close()
	}
}

// sameDescriptor reports whether f and g are descriptors of one file.
func sameDescriptor(f, g *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	gi, err := g.Stat()
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, gi), nil
}

// inodeOf returns the device and inode of fi, the file at path.
func inodeOf(path string, fi os.FileInfo) (dev, ino uint64, err error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no inode", path)
	}
	return uint64(st.Dev), uint64(st.Ino), nil
}

// boltTxidOf reads the id of the newest transaction of the bbolt file f is
// open on from its meta pages, without mapping it.
func boltTxidOf(f *os.File) (uint64, error) {
	var buf [boltpage.PageHeaderSize + boltpage.MetaSize]byte
	var best uint64
	found := false
	ps := int64(0)
	for i := range 2 {
		if n, _ := f.ReadAt(buf[:], int64(i)*ps); n < len(buf) {
			continue
		}
		m, err := boltpage.ParseMeta(buf[:])
		if err != nil {
			if i == 0 {
				ps = boltpage.FirstMetaRead // damaged meta 0: checkLocked decides later
			}
			continue
		}
		if i == 0 {
			ps = int64(m.PageSize)
		}
		if !found || m.Txid > best {
			best, found = m.Txid, true
		}
	}
	if !found {
		return 0, fmt.Errorf("%w: no valid meta page", ErrCorrupt)
	}
	return best, nil
}

// catchUp brings the tail up to date with the files and returns it. The
// caller holds the log's lock (exclusive when exclusive is set: then bytes
// left by a write cut short are cut off the log).
//
// A writer (exclusive) reads every whole record: its checks must see every
// other writer's appends, and its sync carries the ones it builds on. A
// reader reads only the records the log is synced up to, so that nothing it
// shows can vanish in a power cut; each keeps its own tail.
func (s *Store) catchUp(ctx context.Context, exclusive bool) (*tailState, error) {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	cache := &s.rtail
	if exclusive {
		cache = &s.tail
	}
	t, err := s.catchUpLocked(ctx, *cache, exclusive)
	if err != nil {
		return nil, err
	}
	*cache = t
	return t, nil
}

func (s *Store) catchUpLocked(ctx context.Context, old *tailState, exclusive bool) (*tailState, error) {
	key, txid, held, err := s.boltStamp(old)
	if err != nil {
		return nil, err
	}
	dev, ino := key.dev, key.ino
	f := s.walF
	var hdr wal.Header
	hasHdr := false
	var synced int64
	if f != nil {
		var b [wal.HeaderSize + 1]byte
		n, rerr := f.ReadAt(b[:], 0)
		if rerr != nil && n < wal.HeaderSize && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("store %s: read the log: %w", s.path, rerr)
		}
		if n == wal.HeaderSize && !slices.ContainsFunc(b[:n], func(c byte) bool { return c != 0 }) {
			// Zeros and nothing after them: the header of a new log
			// that did not reach the disk (its size did) before a
			// crash. The log is empty; the next write writes the header.
			n = 0
		}
		hdr, hasHdr, err = wal.DecodeHeader(b[:min(n, wal.HeaderSize)])
		if err != nil {
			return nil, fmt.Errorf("store %s: log %s: %w", s.path, s.walPath, err)
		}
		if hasHdr {
			synced = int64(binary.LittleEndian.Uint64(b[wal.SyncedAt:]))
		}
	}
	t := old
	if t == nil || t.dbDev != dev || t.dbIno != ino || t.txid != txid || t.hasHdr != hasHdr || t.hdr != hdr {
		if t, err = s.rebuildTail(ctx, dev, ino, txid, hdr, hasHdr); err != nil {
			return nil, err
		}
	}
	if t.held != held {
		nt := *t
		nt.held = held
		t = &nt
	}
	if !hasHdr || f == nil || t.mode == tailStale || t.foreign {
		return t, nil
	}
	if !exclusive && t.off >= synced && !t.torn {
		// A reader reads up to synced: nothing new to read.
		return t, nil
	}
	gen := hdr.Gen
	limit := int64(-1)
	if !exclusive {
		limit = synced
	}
	sc, err := wal.ScanFile(f, s.walPath, gen, t.off, limit, synced)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.path, err)
	}
	if sc.Torn && exclusive && !s.opts.ReadOnly {
		// A write cut short by a crash: nobody acknowledged it, and the
		// next record must follow the last valid one.
		if err := f.Truncate(sc.End); err != nil {
			return nil, fmt.Errorf("store %s: cut a torn record off the log: %w", s.path, err)
		}
		sc.Torn = false
	}
	if len(sc.Records) == 0 && sc.Torn == t.torn {
		return t, nil
	}
	nt := *t
	nt.torn = sc.Torn
	nt.off = sc.End
	if t.mode == tailOrphan {
		nt.orphan = append(slices.Clip(t.orphan), sc.Records...)
		return &nt, nil
	}
	if len(sc.Records) == 0 {
		return &nt, nil
	}
	ok, err := s.addRecords(ctx, &nt, sc.Records)
	if err != nil {
		return nil, err
	}
	if !ok {
		// The log does not continue the file: treat it as another
		// file's, from its start.
		nt = *t
		nt.mode, nt.sessions, nt.messages, nt.bytes = tailOrphan, map[string]*tailSession{}, 0, 0
		nt.off = wal.HeaderSize
		all, err := wal.ScanFile(f, s.walPath, gen, wal.HeaderSize, limit, synced)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.path, err)
		}
		nt.orphan, nt.off, nt.torn = all.Records, all.End, all.Torn
	}
	return &nt, nil
}

// rebuildTail starts a tail afresh for the bbolt file at the path.
func (s *Store) rebuildTail(ctx context.Context, dev, ino, txid uint64, hdr wal.Header, hasHdr bool) (*tailState, error) {
	t := &tailState{dbDev: dev, dbIno: ino, txid: txid, hdr: hdr, hasHdr: hasHdr, sessions: map[string]*tailSession{}}
	err := s.bolt(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(layout.BucketStore))
		if b == nil {
			return nil
		}
		var err error
		t.applied, t.hasApplied, err = wal.DecodeApplied(b.Get([]byte(wal.KeyState)))
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.hasID && (!t.hasApplied || t.applied.ID != s.id) {
		return nil, fmt.Errorf("store %s: %w: it holds database %s, this Store opened %s; open the path again to use the file now there",
			s.path, ErrMoved, idString(t.applied.ID), idString(s.id))
	}
	switch {
	case !hasHdr:
		t.mode = tailEmpty
	case t.hasApplied && hdr.ID == t.applied.ID && hdr.Gen == t.applied.Gen+1:
		t.mode, t.off = tailNormal, wal.HeaderSize
	case t.hasApplied && hdr.ID == t.applied.ID && hdr.Gen == t.applied.Gen:
		t.mode, t.off = tailNormal, max(t.applied.Off, wal.HeaderSize)
	case t.hasApplied && hdr.ID == t.applied.ID && hdr.Gen < t.applied.Gen:
		t.mode, t.off = tailStale, wal.HeaderSize
	default:
		t.mode, t.off = tailOrphan, wal.HeaderSize
		t.foreign = !t.hasApplied || hdr.ID != t.applied.ID
	}
	return t, nil
}

// addRecords adds log records to t (a copy the caller owns). It reports
// false if a record does not continue its session as t sees it.
func (s *Store) addRecords(ctx context.Context, t *tailState, records [][][]byte) (bool, error) {
	envs := make([][]layout.Envelope, len(records))
	var need []string
	for i, rec := range records {
		for _, v := range rec {
			env, err := layout.DecodeEnvelope(v)
			if err != nil || env.Session == "" {
				return false, nil
			}
			envs[i] = append(envs[i], env)
			if t.sessions[env.Session] == nil && !slices.Contains(need, env.Session) {
				need = append(need, env.Session)
			}
		}
	}
	sessions := make(map[string]*tailSession, len(t.sessions)+len(need))
	for k, v := range t.sessions {
		sessions[k] = v
	}
	t.sessions = sessions
	if err := s.loadSessions(ctx, t, need); err != nil {
		return false, err
	}
	changed := map[string]*tailSession{}
	for i, rec := range records {
		for j, v := range rec {
			env := &envs[i][j]
			ts := changed[env.Session]
			if ts == nil {
				c := *t.sessions[env.Session]
				c.meta = c.meta.Clone()
				ts = &c
				changed[env.Session] = ts
			}
			if env.Seq != ts.meta.LastSeq+1 || env.Epoch != ts.meta.Epoch {
				return false, nil
			}
			if !ts.exists {
				ts.meta.Born(env.Time)
			}
			ts.meta.Add(env, metaMessage(&ts.meta, env))
			ts.exists = true
			ts.recs = append(ts.recs, tailRec{seq: env.Seq, val: v})
			t.messages++
			t.bytes += int64(len(v))
		}
	}
	for k, v := range changed {
		t.sessions[k] = v
	}
	return true, nil
}

// metaMessage returns the parsed message meta.add needs for env: only a
// user message that could still give the session its title or first user
// message is parsed.
func metaMessage(m *layout.Meta, env *layout.Envelope) ctxstore.Message {
	if env.Role != ctxstore.RoleUser || (m.FirstUser != 0 && m.Title != "") {
		return ctxstore.Message{}
	}
	msg, _ := ctxstore.ParseStored(env.Raw)
	return msg
}

// loadSessions reads the named sessions' metadata from bbolt into t (whose
// sessions map the caller owns).
func (s *Store) loadSessions(ctx context.Context, t *tailState, names []string) error {
	if len(names) == 0 {
		return nil
	}
	return s.boltOf(ctx, t, func(tx *bbolt.Tx) error {
		for _, name := range names {
			ts, err := boltSession(tx, name)
			if err != nil {
				return err
			}
			t.sessions[name] = ts
		}
		return nil
	})
}

// boltSession reads one session from bbolt; a session that does not exist is
// shown as it would be created (after its layout.Tombstone, if purged).
func boltSession(tx *bbolt.Tx, name string) (*tailSession, error) {
	_, meta, err := getSession(tx, name)
	if err == nil {
		return &tailSession{meta: meta, exists: true}, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	m := layout.NewMeta(time.Now().UnixNano())
	tomb, found, err := layout.ReadTombstone(tx, name)
	if err != nil {
		return nil, err
	}
	if found {
		m.Epoch, m.EpochSeq, m.LastSeq = tomb.Epoch+1, tomb.LastSeq+1, tomb.LastSeq
		m.Epochs = []layout.EpochMeta{{Epoch: m.Epoch, First: m.EpochSeq, Last: tomb.LastSeq, Started: m.Created}}
	}
	return &tailSession{meta: m}, nil
}

// bolt runs fn in a bbolt read transaction (the caller holds the log's lock).
func (s *Store) bolt(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	return s.boltOf(ctx, nil, fn)
}

// boltOf is bolt on the file t (if not nil) was read against: another file
// moved to the path meanwhile fails it with errReplacedMidway.
func (s *Store) boltOf(ctx context.Context, t *tailState, fn func(tx *bbolt.Tx) error) error {
	db, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release()
	if err := s.checkTailFile(t); err != nil {
		return err
	}
	return s.guard("read", func() error { return db.View(fn) })
}

// applyLog applies the tail to bbolt inside w, first thing in a write
// transaction, and records how far the log is applied. It returns the header
// the log gets once the transaction has committed: a new generation, empty.
func (w *wtx) applyLog(t *tailState) (wal.Header, error) {
	b, err := w.tx.CreateBucketIfNotExists([]byte(layout.BucketStore))
	if err != nil {
		return wal.Header{}, err
	}
	applied := t.applied
	if !t.hasApplied {
		if applied.ID, err = wal.NewID(); err != nil {
			return wal.Header{}, fmt.Errorf("log id: %w", err)
		}
	}
	switch t.mode {
	case tailNormal:
		// The file now holds this log's records up to t.off: a crash
		// before the log is emptied never applies them twice.
		applied = wal.Applied{ID: t.hdr.ID, Gen: t.hdr.Gen, Off: t.off}
		for _, name := range slices.Sorted(mapKeys(t.sessions)) {
			ts := t.sessions[name]
			if len(ts.recs) == 0 {
				continue
			}
			if err := w.applySession(name, ts); err != nil {
				return wal.Header{}, err
			}
		}
	case tailOrphan:
		// Set aside by the commit before it began: never applied.
		return wal.Header{}, fmt.Errorf("%w: the log does not continue the file", ErrCorrupt)
	}
	if err := b.Put([]byte(wal.KeyState), applied.Encode()); err != nil {
		return wal.Header{}, err
	}
	return wal.Header{ID: applied.ID, Gen: applied.Gen + 1}, nil
}

func mapKeys(m map[string]*tailSession) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// applySession writes a session's log records to bbolt with the metadata the
// tail computed for them.
func (w *wtx) applySession(name string, ts *tailSession) error {
	ws, err := w.openSession(name, ts.meta.Created)
	if err != nil {
		return err
	}
	if ws.meta.LastSeq+1 != ts.recs[0].seq {
		return fmt.Errorf("%w: session %q: the log continues at seq %d, the file at %d", ErrCorrupt, name, ts.recs[0].seq, ws.meta.LastSeq+1)
	}
	msgs, err := w.msgsOf(ws)
	if err != nil {
		return err
	}
	for _, r := range ts.recs {
		if err := msgs.Put(layout.SeqKey(r.seq), r.val); err != nil {
			return fmt.Errorf("store: session %q: put seq %d: %w", name, r.seq, err)
		}
	}
	ws.meta = ts.meta.Clone()
	ws.dirty = true
	return nil
}

// resetLog empties the log after a commit that applied it, under a new
// generation. It is not synced: until it reaches the disk, the old
// generation's records read as applied (the bbolt file says so), and the
// next append's sync carries it.
//
// The header is written before the log is cut: a crash in between leaves
// the new header over the old generation's records, which are invalid
// under it and read as a torn tail. Cutting first could leave a new log
// (grown from nothing to the header's size) holding zeros for a header.
func (s *Store) resetLog(h wal.Header) error {
	f := s.walF
	if f == nil {
		return nil
	}
	if _, err := f.WriteAt(h.Encode(), 0); err != nil {
		return fmt.Errorf("store %s: empty the log: %w", s.path, err)
	}
	if err := f.Truncate(wal.HeaderSize); err != nil {
		return fmt.Errorf("store %s: empty the log: %w", s.path, err)
	}
	return nil
}

// forgetTail drops the tail: the next operation rebuilds it from the files.
func (s *Store) forgetTail() {
	s.tailMu.Lock()
	s.tail, s.rtail = nil, nil
	s.tailMu.Unlock()
}
