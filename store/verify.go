package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxstore/ctxstore"
	"go.etcd.io/bbolt"
)

// VerifyReport is what Verify found. It reports; it never fixes.
type VerifyReport struct {
	Path     string `json:"path"`
	Sessions int    `json:"sessions"`
	Messages int    `json:"messages"`
	// Problems is damage: to the file's structure, to records, to seq order, or
	// metadata that disagrees with the messages. At most maxReportedDamage are
	// listed; MoreProblems counts the rest.
	Problems     []VerifyProblem `json:"problems,omitempty"`
	MoreProblems int             `json:"more_problems,omitempty"`
	// Pairing lists tool calls without results and results without calls, per
	// session and epoch. Not damage: an interrupted turn leaves a call unanswered.
	Pairing     []PairingIssue `json:"pairing,omitempty"`
	MorePairing int            `json:"more_pairing,omitempty"`
}

// VerifyProblem is one piece of damage.
type VerifyProblem struct {
	// Kind is "structure" (bbolt pages), "record" (an envelope or its JSON),
	// "order" (seqs or epochs out of order) or "meta" (session metadata).
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	Detail  string `json:"detail"`
}

// String describes the problem on one line, for people.
func (p VerifyProblem) String() string {
	var b strings.Builder
	b.WriteString(p.Kind)
	if p.Session != "" {
		fmt.Fprintf(&b, " session %q", p.Session)
	}
	if p.Seq != 0 {
		fmt.Fprintf(&b, " seq %d", p.Seq)
	}
	b.WriteString(": ")
	b.WriteString(p.Detail)
	return b.String()
}

// PairingIssue is a tool call or result without its other half in its epoch.
type PairingIssue struct {
	Session string `json:"session"`
	Epoch   uint64 `json:"epoch"`
	// Kind is "call_without_result", "result_without_call" or "duplicate_result".
	Kind   string `json:"kind"`
	CallID string `json:"call_id"`
	Seq    uint64 `json:"seq"` // the message making the call or giving the result
}

// String describes the issue on one line, for people.
func (p PairingIssue) String() string {
	return fmt.Sprintf("session %q epoch %d seq %d: %s %q", p.Session, p.Epoch, p.Seq, strings.ReplaceAll(p.Kind, "_", " "), p.CallID)
}

// Intact reports that no damage was found (pairing aside).
func (r *VerifyReport) Intact() bool { return len(r.Problems) == 0 }

// OK reports that the file is intact and every tool call is paired.
func (r *VerifyReport) OK() bool { return r.Intact() && len(r.Pairing) == 0 }

// String is a human summary, one finding a line.
func (r *VerifyReport) String() string {
	var b strings.Builder
	state := "OK"
	switch {
	case !r.Intact():
		state = "DAMAGED"
	case !r.OK():
		state = "intact, unpaired tool calls"
	}
	fmt.Fprintf(&b, "verify %s: %s: %d sessions, %d messages, %d problems, %d pairing issues\n",
		r.Path, state, r.Sessions, r.Messages, len(r.Problems)+r.MoreProblems, len(r.Pairing)+r.MorePairing)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	if r.MoreProblems > 0 {
		fmt.Fprintf(&b, "  ... and %d more problems\n", r.MoreProblems)
	}
	for _, p := range r.Pairing {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	if r.MorePairing > 0 {
		fmt.Fprintf(&b, "  ... and %d more pairing issues\n", r.MorePairing)
	}
	return b.String()
}

func (r *VerifyReport) problem(kind, session string, seq uint64, format string, args ...any) {
	if len(r.Problems) >= maxReportedDamage {
		r.MoreProblems++
		return
	}
	r.Problems = append(r.Problems, VerifyProblem{Kind: kind, Session: session, Seq: seq, Detail: fmt.Sprintf(format, args...)})
}

func (r *VerifyReport) pairing(p PairingIssue) {
	if len(r.Pairing) >= maxReportedDamage {
		r.MorePairing++
		return
	}
	r.Pairing = append(r.Pairing, p)
}

// Verify checks the whole file: its bbolt structure, every envelope (it must decode,
// match its key, carry valid JSON of the role it names), seq and epoch order, each
// session's metadata against its messages, and tool pairing per session and epoch.
// It reports and never fixes. The error is for failing to run (lock timeout,
// cancellation), not for damage.
//
// The pages are walked with bounds-checked reads of the file, not through bbolt's
// mmap, so damage deep in the tree is reported instead of crashing the process;
// bbolt's own consistency check (freelist, unreachable pages) runs only when that
// walk found the tree sound. Writers wait while Verify runs.
func (s *Store) Verify(ctx context.Context) (*VerifyReport, error) {
	db, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release()
	r := &VerifyReport{Path: s.path}
	// Begin and Rollback read the meta and freelist pages through the mmap.
	err = s.guard("verify", func() error {
		// A write transaction (read-only for a ReadOnly store, which cannot
		// write) keeps this process's writers out while the file is read
		// behind bbolt's back; other processes are kept out by the file lock
		// acquire holds.
		tx, err := db.Begin(!s.opts.ReadOnly)
		if err != nil {
			return fmt.Errorf("store %s: verify: %w", s.path, err)
		}
		defer func() { _ = tx.Rollback() }()
		if !verifyPages(ctx, s.path, r) {
			return nil
		}
		// tx.Check runs on a goroutine of its own, which no guard covers:
		// it runs only on a tree the bounds-checked walk found sound.
		for cerr := range tx.Check(bbolt.WithKVStringer(bbolt.HexKVStringer())) {
			r.problem("structure", "", 0, "bbolt check: %v", cerr)
		}
		verifyTombstones(tx, r)
		return nil
	})
	if errors.Is(err, ErrCorrupt) {
		r.problem("structure", "", 0, "%v", err)
	} else if err != nil {
		return nil, err
	}
	return r, ctx.Err()
}

// verifyTombstones checks that every purged name's tombstone decodes: a
// session can no longer be created under a name whose tombstone does not.
func verifyTombstones(tx *bbolt.Tx, r *VerifyReport) {
	sb := tx.Bucket([]byte(bucketStore))
	if sb == nil {
		return
	}
	pb := sb.Bucket([]byte(bucketPurged))
	if pb == nil {
		return
	}
	_ = pb.ForEach(func(k, _ []byte) error {
		if _, _, err := readTombstone(tx, string(k)); err != nil {
			r.problem("meta", string(k), 0, "%v", err)
		}
		return nil
	})
}

// verifyPages walks the file behind path and checks every session. It reports
// whether the page structure was sound.
func verifyPages(ctx context.Context, path string, r *VerifyReport) bool {
	bf, err := openBoltFile(path)
	if bf == nil {
		r.problem("structure", "", 0, "%v", err)
		return false
	}
	defer bf.close()
	if err == nil {
		err = bf.checkMeta()
	}
	if err == nil {
		err = bf.checkRootAndFreelist()
	}
	if err != nil {
		r.problem("structure", "", 0, "%v", err)
		return false
	}
	w := newBoltWalker(bf)
	walkSessions(ctx, w, bucketRoot{page: bf.meta.root}, func(name string, root bucketRoot) {
		r.Sessions++
		v := sessionVerifier{r: r, name: name, epochs: map[uint64]*epochTally{}}
		path := []string{bucketSessions, name}
		w.forEach(path, root, func(e walkElem) bool {
			switch {
			case string(e.key) == keyMeta && !e.bucket:
				m, err := decodeMeta(e.value)
				if err != nil {
					r.problem("meta", name, 0, "%v", err)
				} else {
					v.meta = &m
					if m.Importing {
						r.problem("import", name, 0, "an import of this session has not finished (%d messages so far): if no import is running, purge the session and import it again", m.Total)
					}
				}
			case string(e.key) == bucketMsgs && e.bucket:
				br, ok := w.sub(path, e)
				if !ok {
					return true
				}
				w.forEach(append(path, bucketMsgs), br, func(m walkElem) bool {
					v.message(m)
					return ctx.Err() == nil
				})
			}
			return ctx.Err() == nil
		})
		v.finish()
	})
	for _, is := range w.issues {
		r.problem("structure", "", 0, "%s", is)
	}
	return len(w.issues) == 0
}

// epochTally is what one epoch's messages add up to.
type epochTally struct {
	messages, tokens int
	bytes            int64
	calls            map[string]uint64 // open call id -> seq that made it
	callOrder        []string
	answered         map[string]bool
}

// sessionVerifier checks one session's messages as they stream past in key order.
type sessionVerifier struct {
	r       *VerifyReport
	name    string
	meta    *sessionMeta
	epochs  map[uint64]*epochTally
	order   []uint64
	lastSeq uint64
	lastEp  uint64
	total   int
}

func (v *sessionVerifier) message(e walkElem) {
	r := v.r
	if e.bucket {
		r.problem("record", v.name, 0, "nested bucket %q among messages", e.key)
		return
	}
	r.Messages++
	seq, _ := keySeq(e.key)
	env, err := decodeAt(v.name, e.key, e.value)
	if err != nil {
		r.problem("record", v.name, seq, "%v", err)
		return
	}
	msg, err := ctxstore.ParseMessage(env.Raw)
	if err != nil {
		r.problem("record", v.name, seq, "stored JSON: %v", err)
		return
	}
	if msg.Role() != env.Role {
		r.problem("record", v.name, seq, "record says role %q, its JSON %q", env.Role, msg.Role())
	}
	if seq <= v.lastSeq {
		r.problem("order", v.name, seq, "after seq %d", v.lastSeq)
	}
	if env.Epoch < v.lastEp {
		r.problem("order", v.name, seq, "epoch %d after epoch %d", env.Epoch, v.lastEp)
	}
	v.lastSeq, v.lastEp = max(v.lastSeq, seq), max(v.lastEp, env.Epoch)
	v.total++
	t := v.epochs[env.Epoch]
	if t == nil {
		t = &epochTally{calls: map[string]uint64{}, answered: map[string]bool{}}
		v.epochs[env.Epoch] = t
		v.order = append(v.order, env.Epoch)
	}
	t.messages++
	t.tokens += env.Tokens
	t.bytes += int64(len(env.Raw))
	if v.meta != nil {
		switch em := v.meta.epoch(env.Epoch); {
		case em == nil:
			r.problem("meta", v.name, seq, "epoch %d is not in the session's epoch list", env.Epoch)
		case em.Purged:
			r.problem("meta", v.name, seq, "message of epoch %d, which is marked purged", env.Epoch)
		case seq < em.First || seq > em.Last:
			r.problem("meta", v.name, seq, "outside epoch %d's range %d..%d", env.Epoch, em.First, em.Last)
		}
	}
	// Results first: a message that answers and calls (rare) answers earlier calls.
	for _, id := range env.ResultIDs {
		switch {
		case t.answered[id]:
			r.pairing(PairingIssue{Session: v.name, Epoch: env.Epoch, Kind: "duplicate_result", CallID: id, Seq: seq})
		case t.calls[id] != 0:
			t.answered[id] = true
		default:
			r.pairing(PairingIssue{Session: v.name, Epoch: env.Epoch, Kind: "result_without_call", CallID: id, Seq: seq})
		}
	}
	for _, id := range env.CallIDs {
		if _, ok := t.calls[id]; !ok {
			t.calls[id] = seq
			t.callOrder = append(t.callOrder, id)
		}
	}
}

// finish compares the tallies with the metadata and reports unanswered calls.
func (v *sessionVerifier) finish() {
	r := v.r
	for _, ep := range v.order {
		t := v.epochs[ep]
		for _, id := range t.callOrder {
			if !t.answered[id] {
				r.pairing(PairingIssue{Session: v.name, Epoch: ep, Kind: "call_without_result", CallID: id, Seq: t.calls[id]})
			}
		}
	}
	m := v.meta
	if m == nil {
		r.problem("meta", v.name, 0, "no readable metadata")
		return
	}
	if v.lastSeq > m.LastSeq {
		r.problem("meta", v.name, 0, "last seq is %d, metadata says %d", v.lastSeq, m.LastSeq)
	}
	if v.total != m.Total {
		r.problem("meta", v.name, 0, "%d messages stored, metadata counts %d", v.total, m.Total)
	}
	for _, em := range m.Epochs {
		n := 0
		if t := v.epochs[em.Epoch]; t != nil {
			n = t.messages
		}
		if n != em.Messages {
			r.problem("meta", v.name, 0, "epoch %d holds %d messages, metadata counts %d", em.Epoch, n, em.Messages)
		}
	}
	cur := v.epochs[m.Epoch]
	if cur == nil {
		cur = &epochTally{}
	}
	if cur.messages != m.Messages || cur.tokens != m.Tokens || cur.bytes != m.Bytes {
		r.problem("meta", v.name, 0, "current epoch %d holds %d messages, %d tokens, %d bytes; metadata says %d, %d, %d",
			m.Epoch, cur.messages, cur.tokens, cur.bytes, m.Messages, m.Tokens, m.Bytes)
	}
}
