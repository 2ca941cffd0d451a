package wal

import (
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// The overlay: what the log holds beyond the bbolt file, as a process last
// read it. Every operation takes the log's lock (shared to read, exclusive
// to write), brings the overlay up to date from the files, and then reads
// bbolt and the overlay together. A Tail is never changed once published:
// catching up builds a new one, so a reader can keep using the one it got.

// Mode says how the log relates to the bbolt file at the path.
type Mode int

const (
	Empty  Mode = iota // no log yet (or one never written): nothing beyond bbolt
	Normal             // the log continues the bbolt file
	Orphan             // the log does not continue the file: a writer sets it aside
	// Stale: an older generation of this file's log, every record of it
	// applied (a power cut kept a header that later checkpoints had
	// replaced, unsynced): nothing beyond bbolt; a writer empties it.
	Stale
)

// Tail is the overlay of the log on the bbolt file.
type Tail struct {
	// What it was built from: a change in any of them means the bbolt file
	// changed (a commit, or another file at the path) and the tail is
	// rebuilt.
	DBDev, DBIno uint64
	Txid         uint64
	// Held, if not 0, is the open of the bbolt file that the process held,
	// and so locked against every other writer, from before Txid was read:
	// while it is still held, Txid is still the file's (the process's own
	// commits forget or advance its tails).
	Held   uint64
	Hdr    Header
	HasHdr bool

	Applied    Applied // what bbolt says it holds of the log
	HasApplied bool
	Mode       Mode
	Off        int64 // offset after the last record read
	Torn       bool  // bytes after Off that are no valid record
	// Sessions holds every session the log touches, as bbolt plus the log
	// make it, and sessions loaded from bbolt to check a write against.
	Sessions map[string]*Session
	Orphan   [][][]byte // Mode Orphan: the records set aside
	// Foreign (Mode Orphan) says the log is another database's: it is
	// never read, so damage in it (its own database's to salvage) is not
	// this file's; a writer sets it aside.
	Foreign  bool
	Messages int
	Bytes    int64
}

// Session is one session as the bbolt file plus the log make it.
type Session struct {
	Meta   layout.Meta
	Exists bool  // in bbolt or in the log; false: how it would be created
	Recs   []Rec // the log's messages of the session, by seq
}

// Rec is one message in the log: its seq and its layout.Envelope, encoded as
// bbolt stores it.
type Rec struct {
	Seq uint64
	Val []byte
}

// NewTail starts a tail for the bbolt file (dev, ino) at transaction txid,
// which says applied (hasApplied) about the log whose header is hdr
// (hasHdr false: a log without one).
func NewTail(dev, ino, txid uint64, hdr Header, hasHdr bool, applied Applied, hasApplied bool) *Tail {
	t := &Tail{DBDev: dev, DBIno: ino, Txid: txid, Hdr: hdr, HasHdr: hasHdr, Applied: applied, HasApplied: hasApplied, Sessions: map[string]*Session{}}
	switch {
	case !hasHdr:
		t.Mode = Empty
	case hasApplied && hdr.ID == applied.ID && hdr.Gen == applied.Gen+1:
		t.Mode, t.Off = Normal, HeaderSize
	case hasApplied && hdr.ID == applied.ID && hdr.Gen == applied.Gen:
		t.Mode, t.Off = Normal, max(applied.Off, HeaderSize)
	case hasApplied && hdr.ID == applied.ID && hdr.Gen < applied.Gen:
		t.Mode, t.Off = Stale, HeaderSize
	default:
		t.Mode, t.Off = Orphan, HeaderSize
		t.Foreign = !hasApplied || hdr.ID != applied.ID
	}
	return t
}

// BuiltOn reports whether t was built on the bbolt transaction and log
// header given.
func (t *Tail) BuiltOn(dev, ino, txid uint64, hdr Header, hasHdr bool) bool {
	return t != nil && t.DBDev == dev && t.DBIno == ino && t.Txid == txid && t.HasHdr == hasHdr && t.Hdr == hdr
}

// Records reports whether the log holds anything bbolt does not.
func (t *Tail) Records() bool {
	return t != nil && (t.Messages > 0 || len(t.Orphan) > 0)
}

// Session returns the session's overlay, or nil if the tail knows nothing
// about it (then bbolt alone is right).
func (t *Tail) Session(name string) *Session {
	if t == nil {
		return nil
	}
	return t.Sessions[name]
}

// From returns the session's log records with seq >= seq.
func (ts *Session) From(seq uint64) []Rec {
	i := sort.Search(len(ts.Recs), func(i int) bool { return ts.Recs[i].Seq >= seq })
	return ts.Recs[i:]
}

// InBolt reports whether bbolt may hold messages of the session: its log
// records do not start its history.
func (ts *Session) InBolt() bool {
	return len(ts.Recs) == 0 || ts.Recs[0].Seq != ts.Meta.Epochs[0].First || ts.Meta.Total != len(ts.Recs)
}

// Loader reads the named sessions from the bbolt file t was built on into
// t.Sessions (a map the caller of Advance owns).
type Loader func(t *Tail, names []string) error

// Reading is how Advance reads the log: f, open at path, is synced up to
// Synced; a writer (Exclusive) reads every whole record, and Cut cuts
// bytes left by a write cut short off the log; a reader reads only up to
// Synced, so that nothing it shows can vanish in a power cut.
type Reading struct {
	Owner     string // the database file, for messages
	F         *os.File
	Path      string
	Synced    int64
	Exclusive bool
	Cut       bool
}

// Advance returns t with the records the log holds after t.Off, loading
// the sessions they touch through load, or t itself when nothing changed.
func (t *Tail) Advance(sc Reading, load Loader) (*Tail, error) {
	if !t.HasHdr || sc.F == nil || t.Mode == Stale || t.Foreign {
		return t, nil
	}
	if !sc.Exclusive && t.Off >= sc.Synced && !t.Torn {
		// A reader reads up to synced: nothing new to read.
		return t, nil
	}
	gen := t.Hdr.Gen
	limit := int64(-1)
	if !sc.Exclusive {
		limit = sc.Synced
	}
	read, err := ScanFile(sc.F, sc.Path, gen, t.Off, limit, sc.Synced)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", sc.Owner, err)
	}
	if read.Torn && sc.Cut {
		// A write cut short by a crash: nobody acknowledged it, and the
		// next record must follow the last valid one.
		if err := sc.F.Truncate(read.End); err != nil {
			return nil, fmt.Errorf("store %s: cut a torn record off the log: %w", sc.Owner, err)
		}
		read.Torn = false
	}
	if len(read.Records) == 0 && read.Torn == t.Torn {
		return t, nil
	}
	nt := *t
	nt.Torn = read.Torn
	nt.Off = read.End
	if t.Mode == Orphan {
		nt.Orphan = append(slices.Clip(t.Orphan), read.Records...)
		return &nt, nil
	}
	if len(read.Records) == 0 {
		return &nt, nil
	}
	ok, err := nt.add(read.Records, load)
	if err != nil {
		return nil, err
	}
	if !ok {
		// The log does not continue the file: treat it as another
		// file's, from its start.
		nt = *t
		nt.Mode, nt.Sessions, nt.Messages, nt.Bytes = Orphan, map[string]*Session{}, 0, 0
		nt.Off = HeaderSize
		all, err := ScanFile(sc.F, sc.Path, gen, HeaderSize, limit, sc.Synced)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", sc.Owner, err)
		}
		nt.Orphan, nt.Off, nt.Torn = all.Records, all.End, all.Torn
	}
	return &nt, nil
}

// add adds log records to t (a copy the caller owns). It reports false if a
// record does not continue its session as t sees it.
func (t *Tail) add(records [][][]byte, load Loader) (bool, error) {
	envs := make([][]layout.Envelope, len(records))
	var need []string
	for i, rec := range records {
		for _, v := range rec {
			env, err := layout.DecodeEnvelope(v)
			if err != nil || env.Session == "" {
				return false, nil
			}
			envs[i] = append(envs[i], env)
			if t.Sessions[env.Session] == nil && !slices.Contains(need, env.Session) {
				need = append(need, env.Session)
			}
		}
	}
	sessions := make(map[string]*Session, len(t.Sessions)+len(need))
	for k, v := range t.Sessions {
		sessions[k] = v
	}
	t.Sessions = sessions
	if len(need) > 0 {
		if err := load(t, need); err != nil {
			return false, err
		}
	}
	changed := map[string]*Session{}
	for i, rec := range records {
		for j, v := range rec {
			env := &envs[i][j]
			ts := changed[env.Session]
			if ts == nil {
				c := *t.Sessions[env.Session]
				c.Meta = c.Meta.Clone()
				ts = &c
				changed[env.Session] = ts
			}
			if env.Seq != ts.Meta.LastSeq+1 || env.Epoch != ts.Meta.Epoch {
				return false, nil
			}
			if !ts.Exists {
				ts.Meta.Born(env.Time)
			}
			ts.Meta.Add(env, MetaMessage(&ts.Meta, env))
			ts.Exists = true
			ts.Recs = append(ts.Recs, Rec{Seq: env.Seq, Val: v})
			t.Messages++
			t.Bytes += int64(len(v))
		}
	}
	for k, v := range changed {
		t.Sessions[k] = v
	}
	return true, nil
}

// MetaMessage returns the parsed message Meta.Add needs for env: only a
// user message that could still give the session its title or first user
// message is parsed.
func MetaMessage(m *layout.Meta, env *layout.Envelope) ctxstore.Message {
	if env.Role != ctxstore.RoleUser || (m.FirstUser != 0 && m.Title != "") {
		return ctxstore.Message{}
	}
	msg, _ := ctxstore.ParseStored(env.Raw)
	return msg
}

// Append adds recs to session ts (named session), the session as the log
// will hold it, as appended at now, and returns their envelopes, encoded as
// bbolt stores them; on an error ts is as it was.
func (ts *Session) Append(session string, recs []storage.Record, now int64) ([][]byte, error) {
	if ts.Meta.LastSeq > storage.MaxSeq-uint64(len(recs)) {
		return nil, fmt.Errorf("store: append to session %q: seq %d is the last a session may hold", session, storage.MaxSeq)
	}
	vals := make([][]byte, 0, len(recs))
	saved := ts.Meta.Clone()
	savedRecs := len(ts.Recs)
	for _, rec := range recs {
		env := layout.Envelope{
			Seq: ts.Meta.LastSeq + 1, Epoch: ts.Meta.Epoch, Time: now,
			Role: rec.Message.Role(), Tokens: rec.Tokens, Counter: rec.Counter,
			CallIDs: rec.Message.CallIDs(), ResultIDs: rec.Message.ResultIDs(),
			Raw: rec.Message.Bytes(), Session: session,
		}
		v, err := layout.EncodeEnvelope(&env)
		if err != nil {
			ts.Meta, ts.Recs = saved, ts.Recs[:savedRecs]
			return nil, fmt.Errorf("store: session %q: %w", session, err)
		}
		ts.Meta.Add(&env, rec.Message)
		ts.Recs = append(ts.Recs, Rec{Seq: env.Seq, Val: v})
		vals = append(vals, v)
	}
	ts.Exists = true
	return vals, nil
}
