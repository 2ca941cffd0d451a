package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrSplitsToolGroup means a fork or a rewind was asked to stop inside a
// tool group: after an assistant message whose calls are answered by
// results that come later. The error is a *CutError naming the nearest
// points that do not split a group.
var ErrSplitsToolGroup = errors.New("the point splits a tool group (a call whose results come later)")

// ErrExists means a session that must be new (the target of a fork)
// already exists.
var ErrExists = errors.New("store: session exists")

// CutError is the error of a fork or rewind point inside a tool group. It
// matches ErrSplitsToolGroup.
type CutError struct {
	Session string
	Epoch   uint64
	Seq     uint64
	// Before and After are the nearest seqs of the epoch on either side of
	// Seq after which it may be cut (0 when there is none).
	Before, After uint64
}

func (e *CutError) Error() string {
	near := "no other point of the epoch"
	switch {
	case e.Before != 0 && e.After != 0:
		near = fmt.Sprintf("the nearest valid points are seq %d and seq %d", e.Before, e.After)
	case e.Before != 0:
		near = fmt.Sprintf("the nearest valid point is seq %d", e.Before)
	case e.After != 0:
		near = fmt.Sprintf("the nearest valid point is seq %d", e.After)
	}
	return fmt.Sprintf("session %q epoch %d: seq %d: %v; %s", e.Session, e.Epoch, e.Seq, ErrSplitsToolGroup, near)
}

// Is makes a CutError match ErrSplitsToolGroup.
func (e *CutError) Is(target error) bool { return target == ErrSplitsToolGroup }

// KindLineage is the kind of the derived records Fork and Rewind leave:
// key LineageKey holds a fork's Lineage, keys RewindKey(epoch) the Rewound
// record of each epoch a rewind started.
const KindLineage = "lineage"

// LineageKey is the key of a forked session's Lineage record.
const LineageKey = "fork"

// RewindKey is the key of the Rewound record of epoch.
func RewindKey(epoch uint64) string { return fmt.Sprintf("rewind/%020d", epoch) }

// Lineage is where a forked session came from.
type Lineage struct {
	// Parent is the session forked; Epoch its epoch that was copied, and
	// Seq the last seq copied. The fork's messages keep their seqs, so
	// seq N of the fork is seq N of the parent for every N up to Seq.
	Parent string    `json:"parent"`
	Epoch  uint64    `json:"epoch"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	// ParentGone says the parent was purged since the fork (a session of
	// its name, if any, was created after the fork: another one). Not
	// stored: CheckParent sets it.
	ParentGone bool `json:"-"`
}

// CheckParent sets l.ParentGone by looking the parent up in e.
func (l *Lineage) CheckParent(ctx context.Context, e Engine) error {
	info, err := e.Session(ctx, l.Parent)
	switch {
	case errors.Is(err, ErrNotFound):
		l.ParentGone = true
	case err != nil:
		return fmt.Errorf("the parent of a fork: %w", err)
	default:
		l.ParentGone = info.Created.After(l.Time)
	}
	return nil
}

// ParentNote is what to say after the parent's name: " (purged)" when it
// is gone, else nothing.
func (l Lineage) ParentNote() string {
	if l.ParentGone {
		return " (purged)"
	}
	return ""
}

// Rewound is what a rewind left: the epoch it started was seeded with
// epoch FromEpoch's messages up to seq Seq.
type Rewound struct {
	Epoch     uint64    `json:"epoch"`
	FromEpoch uint64    `json:"from_epoch"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
}

// LineageOf returns the Lineage of a forked session, and false for a
// session that was not forked (or does not exist).
func LineageOf(ctx context.Context, e Engine, session string) (Lineage, bool, error) {
	v, err := GetDerived(ctx, e, session, KindLineage, LineageKey)
	if errors.Is(err, ErrNotFound) {
		return Lineage{}, false, nil
	}
	if err != nil {
		return Lineage{}, false, err
	}
	var l Lineage
	if err := json.Unmarshal(v, &l); err != nil {
		return Lineage{}, false, fmt.Errorf("session %q: lineage record: %w: %w", session, ErrCorrupt, err)
	}
	return l, true, nil
}

// RewindsOf returns the Rewound records of session, oldest epoch first.
func RewindsOf(ctx context.Context, e Engine, session string) ([]Rewound, error) {
	var out []Rewound
	for d, err := range e.ListDerived(ctx, session, KindLineage) {
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(d.Key, "rewind/") {
			continue
		}
		var r Rewound
		if err := json.Unmarshal(d.Value, &r); err != nil {
			return nil, fmt.Errorf("session %q: rewind record %s: %w: %w", session, d.Key, ErrCorrupt, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// CutItem is what checking a fork's or rewind's point needs of one
// message: its seq, the tool calls it makes and those it answers.
type CutItem struct {
	Seq                uint64
	CallIDs, ResultIDs []string
}

// validCuts reports, for each message of an epoch in order, whether the
// epoch may be cut right after it: whether every tool call made at or
// before it that the epoch answers at all is answered at or before it.
// Calls never answered (an interrupted tail) do not hold a cut back.
func validCuts(items []CutItem) []bool {
	callAt := map[string]int{}
	for i, it := range items {
		for _, id := range it.CallIDs {
			if _, ok := callAt[id]; !ok {
				callAt[id] = i
			}
		}
	}
	// open[i] counts the calls made at or before i answered after i.
	delta := make([]int, len(items)+1)
	for j, it := range items {
		for _, id := range it.ResultIDs {
			if i, ok := callAt[id]; ok && i < j {
				delta[i]++
				delta[j]--
			}
		}
	}
	ok := make([]bool, len(items))
	open := 0
	for i := range items {
		open += delta[i]
		ok[i] = open == 0
	}
	return ok
}

// checkCut refuses a cut after seq (which items holds) when it splits a
// tool group, naming the nearest points that do not.
func checkCut(session string, epoch uint64, items []CutItem, seq uint64) error {
	ok := validCuts(items)
	at := -1
	for i, it := range items {
		if it.Seq == seq {
			at = i
			break
		}
	}
	if at < 0 || ok[at] {
		return nil
	}
	ce := &CutError{Session: session, Epoch: epoch, Seq: seq}
	for i := at - 1; i >= 0; i-- {
		if ok[i] {
			ce.Before = items[i].Seq
			break
		}
	}
	for i := at + 1; i < len(items); i++ {
		if ok[i] {
			ce.After = items[i].Seq
			break
		}
	}
	return ce
}

// epochPrefix reads epoch of session: its messages up to seq upTo, whole,
// and what checking a cut needs of all of them.
func epochPrefix(ctx context.Context, e Engine, session string, epoch, upTo uint64) ([]Entry, []CutItem, error) {
	var kept []Entry
	var items []CutItem
	for ent, err := range e.EpochMessages(ctx, session, epoch, 0) {
		if err != nil {
			return nil, nil, err
		}
		items = append(items, CutItem{Seq: ent.Seq, CallIDs: ent.CallIDs, ResultIDs: ent.ResultIDs})
		if ent.Seq <= upTo {
			kept = append(kept, ent)
		}
	}
	return kept, items, nil
}

// ForkReport says what Fork did.
type ForkReport struct {
	// Session is the new session as the fork left it.
	Session SessionInfo
	Lineage Lineage
	// Messages is how many messages were copied.
	Messages int
	// Derived is how many derived records the fork's Carry rules carried
	// over as still valid.
	Derived int
}

// Fork starts session dst as a copy of the current epoch of src up to seq
// at (0: all of it). Each message is copied byte for byte with its seq,
// epoch, time, token count and counter, so the fork's seq N is src's seq N;
// dst records its Lineage (LineageOf). Of src's derived records, those of
// the kinds carry names come along when their rule says they stay valid for
// the copied messages (the program that keeps the records knows how their
// keys relate to seqs and epochs: package persistent gives its rules as
// persistent.ForkCarry); the others (import records, say) do not.
//
// The fork is atomic on an engine that imports in one transaction
// (BulkImporter): dst then exists whole or not at all. dst must not exist
// (ErrExists); a point at that splits a tool group fails with a *CutError;
// an at outside src's current epoch with ErrNotFound. The copied messages
// are held in memory.
func Fork(ctx context.Context, e Engine, src, dst string, at uint64, carry []Carry) (ForkReport, error) {
	if f, ok := e.(Forker); ok {
		return f.Fork(ctx, src, dst, at, carry)
	}
	if err := CheckSession(dst); err != nil {
		return ForkReport{}, err
	}
	if _, err := e.Session(ctx, dst); err == nil {
		return ForkReport{}, fmt.Errorf("fork %q to %q: session %q: %w: a fork needs a new name", src, dst, dst, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return ForkReport{}, err
	}
	imp, rep, source, err := forkImport(ctx, e, src, dst, at, carry)
	if err != nil {
		return ForkReport{}, err
	}
	if err := importWhole(ctx, e, imp); err != nil {
		if errors.Is(err, ErrNotEmpty) {
			return ForkReport{}, fmt.Errorf("fork %q to %q: session %q: %w: a fork needs a new name", src, dst, dst, ErrExists)
		}
		return ForkReport{}, fmt.Errorf("fork %q to %q: %w", src, dst, err)
	}
	if rep.Session, err = e.Session(ctx, dst); err != nil {
		return ForkReport{}, err
	}
	if err := sourceKept(ctx, e, src, source); err != nil {
		// An erase or purge of src committed between the read and the
		// copy's write: the copy would keep what it took away.
		if perr := PurgeIf(context.WithoutCancel(ctx), e, dst, unchangedSince(rep.Session)); perr != nil {
			return ForkReport{}, fmt.Errorf("fork %q to %q: %w (and removing the copy failed: %w)", src, dst, err, perr)
		}
		if sc, ok := e.(Scrubber); ok { // the copy's bytes too, as the erase did
			if _, serr := sc.Scrub(context.WithoutCancel(ctx)); serr != nil {
				return ForkReport{}, fmt.Errorf("fork %q to %q: %w (and scrubbing the removed copy failed: %w)", src, dst, err, serr)
			}
		}
		return ForkReport{}, fmt.Errorf("fork %q to %q: %w", src, dst, err)
	}
	return rep, nil
}

// sourceKept checks that src is still the session read as info, with
// nothing of it erased or purged since: ErrConflict otherwise.
func sourceKept(ctx context.Context, e Engine, src string, info SessionInfo) error {
	now, err := e.Session(ctx, src)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err != nil {
		return SourceKept(nil, info)
	}
	return SourceKept(&now, info)
}

// SourceKept checks that now (nil: there is none) is still the forked
// session read as info, with nothing of it erased or purged since:
// ErrConflict otherwise. An engine's own Fork checks it where it writes.
func SourceKept(now *SessionInfo, info SessionInfo) error {
	if now == nil || !now.Created.Equal(info.Created) || now.Erasures != info.Erasures || now.Epoch < info.Epoch || purgedEpochs(*now) != purgedEpochs(info) {
		return fmt.Errorf("%w: %q was erased or purged while it was copied; try again", ErrConflict, info.Name)
	}
	return nil
}

// purgedEpochs counts info's purged epochs.
func purgedEpochs(info SessionInfo) int {
	n := 0
	for _, ep := range info.Epochs {
		if ep.Purged {
			n++
		}
	}
	return n
}

// ForkPlan is what a fork copies and stores, as PlanFork works it out: an
// engine's own Fork (Forker) copies the messages of epoch Source.Epoch
// with seqs Source.EpochStartSeq to Last, and stores Derived with them.
type ForkPlan struct {
	// Source is the forked session as read; Last the last seq copied.
	Source SessionInfo
	Last   uint64
	// Messages is how many messages the copy holds.
	Messages int
	Lineage  Lineage
	// Derived are the records to store with the copy: those carried over
	// from Source (the first Carried), then the lineage record.
	Derived []Derived
	Carried int
}

// PlanFork checks a fork of info's session (as just read) at seq at (0:
// the whole current epoch) against items, every message of its current
// epoch in order, and works out what the fork stores, carrying derived
// records by carry, for an engine's own Fork. Its errors are Fork's: a
// *CutError, ErrNotFound.
func PlanFork(ctx context.Context, e Engine, info SessionInfo, at uint64, items []CutItem, carry []Carry) (ForkPlan, error) {
	src := info.Name
	if info.Messages == 0 {
		return ForkPlan{}, fmt.Errorf("fork %q: its current epoch %d holds no messages: %w", src, info.Epoch, ErrNotFound)
	}
	if at == 0 {
		at = info.LastSeq
	}
	if at < info.EpochStartSeq || at > info.LastSeq {
		return ForkPlan{}, fmt.Errorf("fork %q at seq %d: %w: its current epoch %d holds seqs %d to %d",
			src, at, ErrNotFound, info.Epoch, info.EpochStartSeq, info.LastSeq)
	}
	n := 0
	for _, it := range items {
		if it.Seq <= at {
			n++
		}
	}
	if n == 0 {
		return ForkPlan{}, fmt.Errorf("fork %q at seq %d: %w: epoch %d holds no message up to it (cleared or purged meanwhile?)", src, at, ErrNotFound, info.Epoch)
	}
	if err := checkCut(src, info.Epoch, items, at); err != nil {
		return ForkPlan{}, fmt.Errorf("fork: %w", err)
	}
	last := items[n-1].Seq
	lin := Lineage{Parent: src, Epoch: info.Epoch, Seq: last, Time: time.Now().UTC()}
	derived, err := carried(ctx, e, src, Copied{Epoch: info.Epoch, First: info.EpochStartSeq, Last: last, Whole: last == info.LastSeq}, carry)
	if err != nil {
		return ForkPlan{}, fmt.Errorf("fork %q: %w", src, err)
	}
	lv, err := json.Marshal(lin)
	if err != nil {
		return ForkPlan{}, err
	}
	plan := ForkPlan{Source: info, Last: last, Messages: n, Lineage: lin, Carried: len(derived)}
	plan.Derived = append(derived, Derived{Kind: KindLineage, Key: LineageKey, Value: lv})
	return plan, nil
}

// forkImport reads what Fork imports as dst, and src as it read it.
func forkImport(ctx context.Context, e Engine, src, dst string, at uint64, carry []Carry) (SessionImport, ForkReport, SessionInfo, error) {
	info, err := e.Session(ctx, src)
	if err != nil {
		return SessionImport{}, ForkReport{}, info, fmt.Errorf("fork %q: %w", src, err)
	}
	upTo := at
	if upTo == 0 {
		upTo = info.LastSeq
	}
	kept, items, err := epochPrefix(ctx, e, src, info.Epoch, upTo)
	if err != nil {
		return SessionImport{}, ForkReport{}, info, fmt.Errorf("fork %q: %w", src, err)
	}
	plan, err := PlanFork(ctx, e, info, at, items, carry)
	if err != nil {
		return SessionImport{}, ForkReport{}, info, err
	}
	for i := range kept {
		kept[i].Session = dst
	}
	imp := SessionImport{Info: plan.Target(dst), Entries: kept, Derived: plan.Derived}
	return imp, ForkReport{Lineage: plan.Lineage, Messages: len(kept), Derived: plan.Carried}, info, nil
}

// Target is the session a fork to dst imports: created at the fork's time,
// holding the copied part of the source's epoch under its numbers.
func (p ForkPlan) Target(dst string) SessionInfo {
	now, src := p.Lineage.Time, p.Source
	ep := EpochInfo{Epoch: src.Epoch, FirstSeq: src.EpochStartSeq, LastSeq: p.Last, Messages: p.Messages, Started: now}
	return SessionInfo{Name: dst, Created: now, Updated: now, Epoch: src.Epoch, EpochStartSeq: src.EpochStartSeq,
		LastSeq: p.Last, Epochs: []EpochInfo{ep}}
}

// importWhole imports one session with its derived records: in one
// transaction when the engine can (BulkImporter), else as ImportSession
// and the records after it, removing the session again if a record fails.
func importWhole(ctx context.Context, e Engine, imp SessionImport) error {
	if b, ok := e.(BulkImporter); ok {
		err := b.ImportSessions(ctx, []SessionImport{imp})
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	if err := ImportSession(ctx, e, imp.Info, imp.EntrySeq()); err != nil {
		return err
	}
	for _, d := range imp.Derived {
		if err := PutDerived(ctx, e, imp.Info.Name, d.Kind, d.Key, d.Value); err != nil {
			if perr := e.Purge(context.WithoutCancel(ctx), imp.Info.Name); perr != nil {
				return fmt.Errorf("%w (and removing the half-made session failed: %w)", err, perr)
			}
			return err
		}
	}
	return nil
}

// Carry is the rule by which Fork carries the derived records of one kind
// to the new session. Derived kinds belong to the program that stores them
// (storage knows nothing of their keys or values); it gives Fork a Carry
// for each kind whose records may stay valid for a copy of some of the
// messages. A Carry of KindLineage is ignored: a fork's lineage is its own.
type Carry struct {
	Kind string
	// Keep reports whether the record of Kind with key stays valid for
	// the copied messages c; nil keeps every record of Kind.
	Keep func(key string, c Copied) bool
}

// Copied is what a fork copies, as a Carry's Keep sees it: the messages of
// epoch Epoch with seqs First to Last, Whole when they are all the epoch
// holds.
type Copied struct {
	Epoch, First, Last uint64
	Whole              bool
}

// Overlaps reports whether any of the seqs first to last is copied.
func (c Copied) Overlaps(first, last uint64) bool { return last >= c.First && first <= c.Last }

// carried returns the derived records of src that carry keeps for the
// copied messages c. Lineage records are the fork's own: none is carried.
func carried(ctx context.Context, e Engine, src string, c Copied, carry []Carry) ([]Derived, error) {
	var out []Derived
	for _, rule := range carry {
		if rule.Kind == KindLineage {
			continue
		}
		for d, err := range e.ListDerived(ctx, src, rule.Kind) {
			if err != nil {
				return nil, err
			}
			if rule.Keep == nil || rule.Keep(d.Key, c) {
				out = append(out, Derived{Kind: rule.Kind, Key: d.Key, Value: d.Value})
			}
		}
	}
	return out, nil
}

// RewindReport says what Rewind did.
type RewindReport struct {
	Rewound
	// First and Last are the seqs the copied messages got in the new
	// epoch; Messages how many there are.
	First, Last uint64
	Messages    int
}

// Rewind makes session continue from seq: a new epoch starts, seeded with
// the messages of the epoch holding seq up to it, copied byte for byte
// (they get new seqs, as appended messages do). Nothing is deleted: every
// earlier epoch stays readable (EpochMessages), so a rewind is undone by
// rewinding to the last seq of the epoch it left. seq may be in any epoch
// not purged. The new epoch appears at once, whole, as a Clear's does to
// other processes; the session's Rewound record follows it.
//
// A seq that splits a tool group fails with a *CutError; a seq the session
// does not hold with ErrNotFound; a session that kept changing between the
// read and the write (others appending) with ErrConflict.
func Rewind(ctx context.Context, e Engine, session string, seq uint64) (RewindReport, error) {
	// A writer appending meanwhile makes the write refuse (it cannot tell
	// whether the new messages answer a call the kept part makes): read
	// again, a few times.
	for try := 1; ; try++ {
		rep, err := rewindOnce(ctx, e, session, seq)
		if !errors.Is(err, ErrConflict) || try == rewindTries {
			return rep, err
		}
	}
}

// rewindTries bounds the reads Rewind makes while others write.
const rewindTries = 3

// rewindOnce is Rewind from one read of the session.
func rewindOnce(ctx context.Context, e Engine, session string, seq uint64) (RewindReport, error) {
	info, err := e.Session(ctx, session)
	if err != nil {
		return RewindReport{}, fmt.Errorf("rewind %q: %w", session, err)
	}
	ep, err := epochOf(info, seq)
	if err != nil {
		return RewindReport{}, err
	}
	kept, items, err := epochPrefix(ctx, e, session, ep.Epoch, seq)
	if err != nil {
		return RewindReport{}, fmt.Errorf("rewind %q: %w", session, err)
	}
	if len(kept) == 0 || kept[len(kept)-1].Seq != seq {
		return RewindReport{}, fmt.Errorf("rewind %q to seq %d: %w: epoch %d does not hold it", session, seq, ErrNotFound, ep.Epoch)
	}
	if err := checkCut(session, ep.Epoch, items, seq); err != nil {
		return RewindReport{}, fmt.Errorf("rewind: %w", err)
	}
	recs := make([]Record, len(kept))
	for i, ent := range kept {
		m, err := ent.Message()
		if err != nil {
			return RewindReport{}, err
		}
		recs[i] = Record{Message: m, Tokens: ent.Tokens, Counter: ent.Counter}
	}
	unchanged := func(si SessionInfo) error {
		// An erase meanwhile changes none of the seqs: the copy read
		// before it would write the erased text back.
		if si.Epoch != info.Epoch || si.LastSeq != info.LastSeq || !si.Created.Equal(info.Created) || si.Erasures != info.Erasures {
			return fmt.Errorf("rewind %q: %w: it changed since it was read (epoch %d, last seq %d, erasures %d; now %d, %d, %d): try again",
				session, ErrConflict, info.Epoch, info.LastSeq, info.Erasures, si.Epoch, si.LastSeq, si.Erasures)
		}
		return nil
	}
	epoch, first, last, err := e.ReplaceEpoch(ctx, session, unchanged, recs...)
	if err != nil {
		return RewindReport{}, err
	}
	rep := RewindReport{Rewound: Rewound{Epoch: epoch, FromEpoch: ep.Epoch, Seq: seq, Time: time.Now().UTC()},
		First: first, Last: last, Messages: len(recs)}
	v, err := json.Marshal(rep.Rewound)
	if err != nil {
		return rep, err
	}
	// Only into the session rewound: one purged since (maybe created
	// again) would be brought back, or given a rewind it never had.
	err = e.UpdateDerived(ctx, session, KindLineage, RewindKey(epoch), func(_ []byte, si SessionInfo) ([]byte, error) {
		if !si.Created.Equal(info.Created) || si.LastSeq < last {
			return nil, errSessionGone
		}
		return v, nil
	})
	if err != nil && !errors.Is(err, errSessionGone) {
		return rep, fmt.Errorf("rewind %q: the new epoch %d is written; recording where it came from failed: %w", session, epoch, err)
	}
	return rep, nil
}

// errSessionGone refuses a write into a session that is no longer the one
// read: purged since, maybe created again.
var errSessionGone = errors.New("the session was purged meanwhile")

// epochOf returns the epoch of info that holds seq, not purged.
func epochOf(info SessionInfo, seq uint64) (EpochInfo, error) {
	for _, ep := range info.Epochs {
		if seq < ep.FirstSeq || seq > ep.LastSeq {
			continue
		}
		if ep.Purged {
			return EpochInfo{}, fmt.Errorf("session %q seq %d: %w: its epoch %d was purged", info.Name, seq, ErrNotFound, ep.Epoch)
		}
		return ep, nil
	}
	return EpochInfo{}, fmt.Errorf("session %q seq %d: %w: the session holds seqs up to %d", info.Name, seq, ErrNotFound, info.LastSeq)
}

// Forker is implemented by engines that copy a fork's messages without
// handing them to the program and back. Fork uses it.
type Forker interface {
	// Fork is the Fork function of this package for this engine: it
	// works the fork out with PlanFork and stores it in one transaction.
	Fork(ctx context.Context, src, dst string, at uint64, carry []Carry) (ForkReport, error)
}
