package storage

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MaxSeq is the highest seq, and the highest epoch, a session may have:
// what a signed 64-bit integer (PostgreSQL's bigint) holds.
const MaxSeq = 1<<63 - 1

// ImportCheck checks what Engine.ImportSession is given, the same way in
// every engine, and works out the epochs of the session it restores. An
// export is input like any other: metadata that contradicts itself or its
// entries would leave a session that reads as damaged, or that each engine
// would repair differently, so it is refused with an error matching
// ErrInvalidImport that says what is wrong.
//
// What info may leave out (0 or empty) is worked out from the entries: its
// epoch list (epochs the entries have that it lacks are added), its last
// seq, its current epoch's start seq; Epoch 0 (unknown) requires an empty
// epoch list. What it gives must agree with the entries and with itself:
//
//   - epochs are listed oldest first, each once, none after the current one;
//     each covers seqs FirstSeq..LastSeq (LastSeq = FirstSeq-1 when empty),
//     FirstSeq at least 1, ranges not overlapping, none past LastSeq;
//   - the current epoch, when listed, is not purged, starts at
//     EpochStartSeq (when given) and ends at LastSeq (when given); when it
//     is not listed, EpochStartSeq (when given) comes after every listed
//     epoch and at most one after LastSeq;
//   - entries come in increasing seq order with non-decreasing epochs, none
//     0, none past the current epoch or LastSeq; each lies in its epoch's
//     listed range, not in an epoch marked purged, and one of an epoch not
//     listed lies between the listed epochs around it; entries of the
//     current epoch start at EpochStartSeq or after, earlier ones end
//     before it;
//   - counts are not negative, token counts at most MaxTokens; numbers are
//     at most MaxSeq.
//
// Counts (messages, tokens, bytes) in info are not checked against the
// entries: engines recompute them.
type ImportCheck struct {
	info SessionInfo
	// listed indexes info.Epochs by epoch.
	listed map[uint64]int
	// lastSeq and lastEpoch are those of the last entry checked.
	lastSeq, lastEpoch uint64
	// counted holds, per epoch, the seqs, count and start time of its
	// entries; order the epochs in the order the entries had them.
	counted map[uint64]*EpochInfo
	order   []uint64
}

// NewImportCheck checks info by itself and returns the check its entries
// go through. Its error matches ErrInvalidImport; it does not name the
// session (the engine does).
func NewImportCheck(info SessionInfo) (*ImportCheck, error) {
	c := &ImportCheck{info: info, listed: make(map[uint64]int, len(info.Epochs)), counted: map[uint64]*EpochInfo{}}
	if err := c.checkInfo(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidImport, err)
	}
	for i, e := range info.Epochs {
		c.listed[e.Epoch] = i
	}
	return c, nil
}

func (c *ImportCheck) checkInfo() error {
	info := &c.info
	if info.Epoch > MaxSeq || info.LastSeq > MaxSeq || info.EpochStartSeq > MaxSeq {
		return fmt.Errorf("epoch %d, last seq %d or epoch start seq %d over %d", info.Epoch, info.LastSeq, info.EpochStartSeq, uint64(MaxSeq))
	}
	if info.Messages < 0 || info.Tokens < 0 || info.Bytes < 0 || info.TotalMessages < 0 {
		return fmt.Errorf("negative count (messages %d, tokens %d, bytes %d, total %d)", info.Messages, info.Tokens, info.Bytes, info.TotalMessages)
	}
	if info.Epoch == 0 && (len(info.Epochs) > 0 || info.EpochStartSeq != 0) {
		return fmt.Errorf("an epoch list of %d epochs or an epoch start seq (%d) without the current epoch (epoch 0)", len(info.Epochs), info.EpochStartSeq)
	}
	var first error
	checkEpochList(info, false, func(err error) bool {
		first = err
		return false
	})
	return first
}

// checkEpochList checks info's epoch list against itself and info's
// numbers, and calls report with each problem found, one per epoch at
// most, until it returns false. Problems name the epoch, not the session.
//
// An import's info (stored false) may leave its last seq, its current
// epoch's start seq (0) and its current epoch (unlisted) out. A stored
// session's (stored true) may not: its numbers are checked as they are,
// its current epoch must be listed, last, and a purged epoch must count
// no messages.
func checkEpochList(info *SessionInfo, stored bool, report func(error) bool) {
	knownLast := stored || info.LastSeq != 0
	knownStart := stored || info.EpochStartSeq != 0
	if stored && info.Epoch == 0 {
		report(errors.New("current epoch 0 (epochs start at 1)"))
		return
	}
	var prev *EpochInfo
	listed := false // the current epoch is
	for i := range info.Epochs {
		e := &info.Epochs[i]
		current := e.Epoch == info.Epoch
		listed = listed || current
		var err error
		switch {
		case e.Epoch == 0:
			err = errors.New("epoch list names epoch 0")
		case e.Epoch > info.Epoch:
			err = fmt.Errorf("epoch list names epoch %d, after the current epoch %d", e.Epoch, info.Epoch)
		case prev != nil && e.Epoch == prev.Epoch:
			err = fmt.Errorf("epoch list names epoch %d twice", e.Epoch)
		case prev != nil && e.Epoch < prev.Epoch:
			err = fmt.Errorf("epoch list is out of order: epoch %d after epoch %d", e.Epoch, prev.Epoch)
		case e.Messages < 0:
			err = fmt.Errorf("epoch %d: negative message count %d", e.Epoch, e.Messages)
		case e.FirstSeq > MaxSeq || e.LastSeq > MaxSeq:
			err = fmt.Errorf("epoch %d: seqs %d-%d over %d", e.Epoch, e.FirstSeq, e.LastSeq, uint64(MaxSeq))
		case e.FirstSeq == 0:
			err = fmt.Errorf("epoch %d: first seq 0 (seqs start at 1)", e.Epoch)
		case e.LastSeq+1 < e.FirstSeq:
			err = fmt.Errorf("epoch %d: last seq %d before first seq %d", e.Epoch, e.LastSeq, e.FirstSeq)
		case knownLast && e.LastSeq > info.LastSeq:
			err = fmt.Errorf("epoch %d: last seq %d after the session's last seq %d", e.Epoch, e.LastSeq, info.LastSeq)
		case prev != nil && prev.LastSeq >= e.FirstSeq:
			err = fmt.Errorf("epoch %d starts at seq %d, inside epoch %d (up to %d)", e.Epoch, e.FirstSeq, prev.Epoch, prev.LastSeq)
		case current && e.Purged:
			err = fmt.Errorf("epoch %d, the current one, is marked purged (only earlier epochs can be)", e.Epoch)
		case current && knownStart && e.FirstSeq != info.EpochStartSeq:
			err = fmt.Errorf("epoch %d, the current one, starts at seq %d, not at the epoch start seq %d", e.Epoch, e.FirstSeq, info.EpochStartSeq)
		case current && knownLast && e.LastSeq != info.LastSeq:
			err = fmt.Errorf("epoch %d, the current one, ends at seq %d, not at the session's last seq %d", e.Epoch, e.LastSeq, info.LastSeq)
		case !current && knownStart && e.LastSeq >= info.EpochStartSeq:
			err = fmt.Errorf("epoch %d ends at seq %d, not before the current epoch's start seq %d", e.Epoch, e.LastSeq, info.EpochStartSeq)
		case stored && e.Purged && e.Messages != 0:
			err = fmt.Errorf("epoch %d is marked purged but counts %d messages", e.Epoch, e.Messages)
		}
		if err != nil && !report(err) {
			return
		}
		prev = e
	}
	switch {
	case stored && !listed:
		report(fmt.Errorf("the current epoch %d is not in the epoch list", info.Epoch))
	case !listed && knownLast && info.EpochStartSeq > info.LastSeq+1:
		// When it is listed, its own range says so.
		report(fmt.Errorf("the current epoch starts at seq %d, after the session's last seq %d and the next one", info.EpochStartSeq, info.LastSeq))
	}
}

// Entry checks the next entry against info and the entries before it,
// and counts it. Its error matches ErrInvalidImport and names the entry's
// seq; it does not name the session. It does not parse the message.
func (c *ImportCheck) Entry(e Entry) error {
	if err := c.checkEntry(&e); err != nil {
		return fmt.Errorf("%w: seq %d epoch %d: %w", ErrInvalidImport, e.Seq, e.Epoch, err)
	}
	ep := c.counted[e.Epoch]
	if ep == nil {
		ep = &EpochInfo{Epoch: e.Epoch, FirstSeq: e.Seq, Started: e.Time}
		c.counted[e.Epoch] = ep
		c.order = append(c.order, e.Epoch)
	}
	ep.LastSeq = e.Seq
	ep.Messages++
	c.lastSeq, c.lastEpoch = e.Seq, e.Epoch
	return nil
}

func (c *ImportCheck) checkEntry(e *Entry) error {
	info := &c.info
	switch {
	case e.Seq == 0 || e.Epoch == 0:
		return errors.New("seqs and epochs start at 1")
	case e.Seq <= c.lastSeq:
		return fmt.Errorf("after seq %d: entries must come in increasing seq order", c.lastSeq)
	case e.Epoch < c.lastEpoch:
		return fmt.Errorf("after a message of epoch %d: epochs must not decrease", c.lastEpoch)
	case e.Seq > MaxSeq || e.Epoch > MaxSeq:
		return fmt.Errorf("over %d", uint64(MaxSeq))
	case info.Epoch != 0 && e.Epoch > info.Epoch:
		return fmt.Errorf("epoch %d is after the session's current epoch %d", e.Epoch, info.Epoch)
	case info.LastSeq != 0 && e.Seq > info.LastSeq:
		return fmt.Errorf("seq %d is after the session's last seq %d", e.Seq, info.LastSeq)
	case e.Tokens < 0:
		return fmt.Errorf("negative token count %d", e.Tokens)
	case e.Tokens > MaxTokens:
		return fmt.Errorf("token count %d over %d", e.Tokens, MaxTokens)
	case info.EpochStartSeq != 0 && e.Epoch == info.Epoch && e.Seq < info.EpochStartSeq:
		return fmt.Errorf("a message of the current epoch before its start seq %d", info.EpochStartSeq)
	case info.EpochStartSeq != 0 && e.Epoch < info.Epoch && e.Seq >= info.EpochStartSeq:
		return fmt.Errorf("a message of an earlier epoch at or after the current epoch's start seq %d", info.EpochStartSeq)
	}
	if i, ok := c.listed[e.Epoch]; ok {
		ep := &info.Epochs[i]
		switch {
		case ep.Purged:
			return fmt.Errorf("a message of epoch %d, which the epoch list marks purged", e.Epoch)
		case e.Seq < ep.FirstSeq || e.Seq > ep.LastSeq:
			return fmt.Errorf("outside epoch %d's seqs %d-%d in the epoch list", e.Epoch, ep.FirstSeq, ep.LastSeq)
		}
		return nil
	}
	// An epoch the list lacks: its seqs lie between the listed epochs
	// around it.
	i, _ := slices.BinarySearchFunc(info.Epochs, e.Epoch, func(ep EpochInfo, epoch uint64) int {
		return cmp.Compare(ep.Epoch, epoch)
	})
	if i > 0 && e.Seq <= info.Epochs[i-1].LastSeq {
		p := &info.Epochs[i-1]
		return fmt.Errorf("epoch %d, which the epoch list lacks, would overlap epoch %d (seqs %d-%d)", e.Epoch, p.Epoch, p.FirstSeq, p.LastSeq)
	}
	if i < len(info.Epochs) && e.Seq >= info.Epochs[i].FirstSeq {
		n := &info.Epochs[i]
		return fmt.Errorf("epoch %d, which the epoch list lacks, would overlap epoch %d (seqs %d-%d)", e.Epoch, n.Epoch, n.FirstSeq, n.LastSeq)
	}
	return nil
}

// ImportLayout is the shape of an imported session: its current epoch,
// where that epoch starts, its last seq, and every epoch, oldest first, the
// last being the current one (FirstSeq EpochStartSeq, LastSeq LastSeq).
type ImportLayout struct {
	Epoch, EpochStartSeq, LastSeq uint64
	// Epochs has info's epochs with Messages counted from the entries,
	// those the entries have that info lacks, and the current one.
	Epochs []EpochInfo
}

// Layout is the session info and the entries checked so far describe. An
// epoch it adds for want of messages or of a listing (the current one, when
// neither gives it) starts at updated.
func (c *ImportCheck) Layout(updated time.Time) ImportLayout {
	info := &c.info
	l := ImportLayout{Epoch: max(info.Epoch, c.lastEpoch, 1), LastSeq: max(info.LastSeq, c.lastSeq)}
	for _, e := range info.Epochs {
		l.LastSeq = max(l.LastSeq, e.LastSeq)
	}
	if info.EpochStartSeq != 0 {
		l.LastSeq = max(l.LastSeq, info.EpochStartSeq-1)
	}
	for _, e := range info.Epochs {
		e.Messages = 0
		if n := c.counted[e.Epoch]; n != nil {
			e.Messages = n.Messages
		}
		l.Epochs = append(l.Epochs, e)
	}
	for _, epoch := range c.order {
		if _, ok := c.listed[epoch]; !ok {
			l.Epochs = append(l.Epochs, *c.counted[epoch])
		}
	}
	slices.SortStableFunc(l.Epochs, func(a, b EpochInfo) int { return cmp.Compare(a.Epoch, b.Epoch) })
	if n := len(l.Epochs); n == 0 || l.Epochs[n-1].Epoch < l.Epoch {
		l.Epochs = append(l.Epochs, EpochInfo{Epoch: l.Epoch, FirstSeq: l.LastSeq + 1, Started: updated})
	}
	cur := &l.Epochs[len(l.Epochs)-1]
	if info.EpochStartSeq != 0 {
		cur.FirstSeq = info.EpochStartSeq
	}
	cur.LastSeq = l.LastSeq
	l.EpochStartSeq = cur.FirstSeq
	return l
}
