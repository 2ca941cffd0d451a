package storage

import (
	"fmt"
	"strings"
)

// MaxReported bounds the problem and pairing lists of a VerifyReport: a
// store of garbage would otherwise report every record.
const MaxReported = 100

// VerifyReport is what Verify found. It reports; it never fixes.
type VerifyReport struct {
	// Path is the store verified: a file's path, or a server and database.
	Path     string `json:"path"`
	Sessions int    `json:"sessions"`
	Messages int    `json:"messages"`
	// Problems is damage: to the store's structure, to records, to seq
	// order, or metadata that disagrees with the messages. At most
	// MaxReported are listed; MoreProblems counts the rest.
	Problems     []VerifyProblem `json:"problems,omitempty"`
	MoreProblems int             `json:"more_problems,omitempty"`
	// Pairing lists tool calls without results and results without calls,
	// per session and epoch. Not damage: an interrupted turn leaves a call
	// unanswered.
	Pairing     []PairingIssue `json:"pairing,omitempty"`
	MorePairing int            `json:"more_pairing,omitempty"`
}

// ProblemKind says what a VerifyProblem is damage to.
type ProblemKind string

// The kinds of damage Verify reports.
const (
	// ProblemStructure is damage to the engine's own structures.
	ProblemStructure ProblemKind = "structure"
	// ProblemRecord is a stored message, or its JSON, that is damaged.
	ProblemRecord ProblemKind = "record"
	// ProblemOrder is seqs or epochs out of order.
	ProblemOrder ProblemKind = "order"
	// ProblemMeta is session metadata that disagrees with the messages.
	ProblemMeta ProblemKind = "meta"
	// ProblemLog is damage to a file engine's write-ahead log.
	ProblemLog ProblemKind = "log"
	// ProblemImport is an import of a session that did not finish.
	ProblemImport ProblemKind = "import"
	// ProblemOrphan is stored data no session owns: messages or derived
	// records under a session number no session record names.
	ProblemOrphan ProblemKind = "orphan"
	// ProblemNumber is a session number above the last one the store has
	// given out: the next session created would be given it too.
	ProblemNumber ProblemKind = "number"
)

// VerifyProblem is one piece of damage.
type VerifyProblem struct {
	Kind    ProblemKind `json:"kind"`
	Session string      `json:"session,omitempty"`
	Seq     uint64      `json:"seq,omitempty"`
	Detail  string      `json:"detail"`
	// Count is how many times this problem was found, when more than once:
	// a problem that names no seq is listed once and counted.
	Count int `json:"count,omitempty"`
}

// String describes the problem on one line, for people.
func (p VerifyProblem) String() string {
	where := ""
	if p.Seq != 0 {
		where = fmt.Sprintf(" seq %d", p.Seq)
	}
	return p.line(where, "")
}

// line is the problem's kind, session, where (seqs), detail and note.
func (p VerifyProblem) line(where, note string) string {
	var b strings.Builder
	b.WriteString(string(p.Kind))
	if p.Session != "" {
		fmt.Fprintf(&b, " session %q", p.Session)
	}
	b.WriteString(where)
	b.WriteString(": ")
	b.WriteString(p.Detail)
	b.WriteString(note)
	return b.String()
}

// PairingKind says what is wrong with a tool call's pairing.
type PairingKind string

// The pairing problems Verify reports.
const (
	// CallWithoutResult is a tool call no result in its epoch answers.
	CallWithoutResult PairingKind = "call_without_result"
	// ResultWithoutCall is a tool result no call in its epoch made.
	ResultWithoutCall PairingKind = "result_without_call"
	// DuplicateResult is a second result for one call.
	DuplicateResult PairingKind = "duplicate_result"
)

// PairingIssue is a tool call or result without its other half in its epoch.
type PairingIssue struct {
	Session string      `json:"session"`
	Epoch   uint64      `json:"epoch"`
	Kind    PairingKind `json:"kind"`
	CallID  string      `json:"call_id"`
	Seq     uint64      `json:"seq"` // the message making the call or giving the result
}

// String describes the issue on one line, for people.
func (p PairingIssue) String() string {
	return fmt.Sprintf("session %q epoch %d seq %d: %s %q", p.Session, p.Epoch, p.Seq, strings.ReplaceAll(string(p.Kind), "_", " "), p.CallID)
}

// Intact reports that no damage was found (pairing aside).
func (r *VerifyReport) Intact() bool { return len(r.Problems) == 0 }

// OK reports that the store is intact and every tool call is paired.
func (r *VerifyReport) OK() bool { return r.Intact() && len(r.Pairing) == 0 }

// ProblemCount is how many problems were found, listed or not.
func (r *VerifyReport) ProblemCount() int {
	n := r.MoreProblems
	for _, p := range r.Problems {
		n += max(p.Count, 1)
	}
	return n
}

// maxPrinted bounds the lines String prints for problems, and apart for
// pairing issues; the rest are counted.
const maxPrinted = 20

// String is a human summary: problems that differ only in their seq are
// grouped on one line with a count, at most 20 lines of problems and 20 of
// pairing issues are printed, and the rest are counted.
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
		r.Path, state, r.Sessions, r.Messages, r.ProblemCount(), len(r.Pairing)+r.MorePairing)
	groups := groupProblems(r.Problems)
	more := r.MoreProblems
	for i, g := range groups {
		if i >= maxPrinted {
			more += g.count
			continue
		}
		fmt.Fprintf(&b, "  %s\n", g)
	}
	if more > 0 {
		fmt.Fprintf(&b, "  ... and %d more problems\n", more)
	}
	for i, p := range r.Pairing {
		if i >= maxPrinted {
			break
		}
		fmt.Fprintf(&b, "  %s\n", p)
	}
	if n := len(r.Pairing) - min(len(r.Pairing), maxPrinted) + r.MorePairing; n > 0 {
		fmt.Fprintf(&b, "  ... and %d more pairing issues\n", n)
	}
	return b.String()
}

// problemGroup is the problems that differ only in their seq.
type problemGroup struct {
	first VerifyProblem
	seqs  []uint64 // one per problem listed; 0 where it names no seq
	count int      // problems found
}

// groupProblems groups problems by kind, session and detail, in the order
// each group first appears.
func groupProblems(ps []VerifyProblem) []*problemGroup {
	type key struct {
		kind            ProblemKind
		session, detail string
	}
	at := map[key]*problemGroup{}
	var out []*problemGroup
	for _, p := range ps {
		k := key{p.Kind, p.Session, p.Detail}
		g := at[k]
		if g == nil {
			g = &problemGroup{first: p}
			at[k] = g
			out = append(out, g)
		}
		g.seqs = append(g.seqs, p.Seq)
		g.count += max(p.Count, 1)
	}
	return out
}

// String prints the group on one line: the problem itself when it is
// alone, else its first seqs and how many problems it holds.
func (g *problemGroup) String() string {
	if g.count == 1 {
		return g.first.String()
	}
	var seqs []string
	for _, s := range g.seqs {
		if s == 0 {
			continue
		}
		if len(seqs) == 5 {
			seqs = append(seqs, "…")
			break
		}
		seqs = append(seqs, fmt.Sprint(s))
	}
	where := ""
	if len(seqs) > 0 {
		where = " seqs " + strings.Join(seqs, ", ")
	}
	return g.first.line(where, fmt.Sprintf(" (%d times)", g.count))
}

// AddProblem records one piece of damage, counting it in MoreProblems once
// MaxReported are listed.
func (r *VerifyReport) AddProblem(kind ProblemKind, session string, seq uint64, format string, args ...any) {
	p := VerifyProblem{Kind: kind, Session: session, Seq: seq, Detail: fmt.Sprintf(format, args...)}
	if seq == 0 {
		for i := range r.Problems {
			if q := &r.Problems[i]; q.Seq == 0 && q.Kind == kind && q.Session == session && q.Detail == p.Detail {
				q.Count = max(q.Count, 1) + 1
				return
			}
		}
	}
	if len(r.Problems) >= MaxReported {
		r.MoreProblems++
		return
	}
	r.Problems = append(r.Problems, p)
}

// AddPairing records one pairing issue, counting it in MorePairing once
// MaxReported are listed.
func (r *VerifyReport) AddPairing(p PairingIssue) {
	if len(r.Pairing) >= MaxReported {
		r.MorePairing++
		return
	}
	r.Pairing = append(r.Pairing, p)
}

// PairingAudit checks the tool pairing of one session's messages, fed in
// seq order: per epoch, every result must answer an earlier call of the
// epoch, once, and every call should be answered.
type PairingAudit struct {
	Session string
	epochs  map[uint64]*pairTally
	order   []uint64
}

type pairTally struct {
	calls     map[string]uint64 // call id -> seq that made it
	callOrder []string
	answered  map[string]bool
}

// Add audits one message.
func (a *PairingAudit) Add(r *VerifyReport, epoch, seq uint64, callIDs, resultIDs []string) {
	if a.epochs == nil {
		a.epochs = map[uint64]*pairTally{}
	}
	t := a.epochs[epoch]
	if t == nil {
		t = &pairTally{calls: map[string]uint64{}, answered: map[string]bool{}}
		a.epochs[epoch] = t
		a.order = append(a.order, epoch)
	}
	// Results first: a message that answers and calls (rare) answers
	// earlier calls.
	for _, id := range resultIDs {
		switch {
		case t.answered[id]:
			r.AddPairing(PairingIssue{Session: a.Session, Epoch: epoch, Kind: DuplicateResult, CallID: id, Seq: seq})
		case t.calls[id] != 0:
			t.answered[id] = true
		default:
			r.AddPairing(PairingIssue{Session: a.Session, Epoch: epoch, Kind: ResultWithoutCall, CallID: id, Seq: seq})
		}
	}
	for _, id := range callIDs {
		if _, ok := t.calls[id]; !ok {
			t.calls[id] = seq
			t.callOrder = append(t.callOrder, id)
		}
	}
}

// Finish reports the calls left unanswered.
func (a *PairingAudit) Finish(r *VerifyReport) {
	for _, ep := range a.order {
		t := a.epochs[ep]
		for _, id := range t.callOrder {
			if !t.answered[id] {
				r.AddPairing(PairingIssue{Session: a.Session, Epoch: ep, Kind: CallWithoutResult, CallID: id, Seq: t.calls[id]})
			}
		}
	}
}

// EpochAudit checks one stored session's epoch list for Verify, the same
// way in every engine: the list by itself and against the session's
// numbers (NewEpochAudit), each stored message against the epoch it names
// (Message), and each epoch's message count against the messages found
// (Finish). Every problem is of kind "meta" and names the session; the
// epoch and seqs concerned are in its detail, a message's seq in its Seq.
//
// A consistent list is what ImportCheck accepts, with nothing left out:
// epochs oldest first, each once, none 0 and none after the current one;
// each covering seqs FirstSeq..LastSeq (LastSeq = FirstSeq-1 when empty),
// FirstSeq at least 1, ranges in increasing order without overlap, none
// past the session's LastSeq; the current epoch listed last, not purged,
// from EpochStartSeq to LastSeq; a purged epoch counting no messages.
// Seqs missing inside or between epochs are not damage: PurgeEpoch and
// imports leave such gaps.
type EpochAudit struct {
	info SessionInfo
	// at indexes info.Epochs by epoch (the first listing of each).
	at     map[uint64]int
	counts map[uint64]int
}

// NewEpochAudit reports into r what is wrong with info's epoch list by
// itself, and returns the audit info's stored messages go through.
func NewEpochAudit(r *VerifyReport, info SessionInfo) *EpochAudit {
	a := &EpochAudit{info: info, at: make(map[uint64]int, len(info.Epochs)), counts: map[uint64]int{}}
	checkEpochList(&a.info, true, func(err error) bool {
		r.AddProblem(ProblemMeta, info.Name, 0, "%v", err)
		return true
	})
	for i, e := range info.Epochs {
		if _, ok := a.at[e.Epoch]; !ok {
			a.at[e.Epoch] = i
		}
	}
	return a
}

// Message checks one stored message, of epoch at seq: its epoch must be
// listed, not purged, and hold seq in its range. It counts the message in
// its epoch.
func (a *EpochAudit) Message(r *VerifyReport, seq, epoch uint64) {
	a.counts[epoch]++
	i, ok := a.at[epoch]
	if !ok {
		r.AddProblem(ProblemMeta, a.info.Name, seq, "epoch %d is not in the session's epoch list", epoch)
		return
	}
	switch e := &a.info.Epochs[i]; {
	case e.Purged:
		r.AddProblem(ProblemMeta, a.info.Name, seq, "message of epoch %d, which is marked purged", epoch)
	case seq < e.FirstSeq || seq > e.LastSeq:
		r.AddProblem(ProblemMeta, a.info.Name, seq, "outside epoch %d's range %d..%d", epoch, e.FirstSeq, e.LastSeq)
	}
}

// Finish reports every epoch whose message count differs from the
// messages Message counted of it. A purged epoch's count is checked
// against 0 by NewEpochAudit, and each message of it by Message.
func (a *EpochAudit) Finish(r *VerifyReport) {
	for _, e := range a.info.Epochs {
		if n := a.counts[e.Epoch]; !e.Purged && n != e.Messages {
			r.AddProblem(ProblemMeta, a.info.Name, 0, "epoch %d holds %d messages, metadata counts %d", e.Epoch, n, e.Messages)
		}
	}
}
