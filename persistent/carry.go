package persistent

import (
	"strconv"
	"strings"

	"github.com/ctxstore/ctxstore/storage"
)

// ForkCarry returns the rules by which storage.Fork carries a manager's
// derived records to a fork of its session; pass it to storage.Fork. Kept
// counts and repair notes go with the copied messages they are about, the
// learned usage ratio always, and saved view decisions when the fork copies
// the whole epoch they were made over (a manager on the fork then sends what
// one on the parent sends, with no escalation; a fork of a part decides
// again). Import records stay with the session that was imported. A fork
// copies what is stored: the decisions of a manager's latest view are
// stored once its Flush, next write or Close has returned (see
// Manager.GetMessagesForRequest).
func ForkCarry() []storage.Carry {
	return []storage.Carry{
		{Kind: KindCounts, Keep: countsCarried},
		{Kind: KindRepair, Keep: repairCarried},
		{Kind: KindUsage}, // the session's ratio, whatever part is copied
		{Kind: KindView, Keep: viewCarried},
	}
}

// EraseDrops returns the kinds of a manager's derived records that
// storage.Erase drops with the erased messages; pass it to storage.Erase.
// Saved view decisions go because they hold summaries written from the
// messages' text and choices made over it; repair records and kept counts
// because they describe the messages as they were (a count is the erased
// text's length in tokens). A manager's next request makes what it needs
// again from the erased messages. The learned usage ratio stays: it is one
// number about the model's way of counting, learned over the session's
// views, and says nothing of any message's text.
func EraseDrops() []string {
	return []string{KindView, KindRepair, KindCounts}
}

// EpochDrops returns the rules by which a purge of an epoch drops a
// manager's derived records with the epoch's messages; pass it to
// storage.PurgeEpoch, or as storage.Retention.EpochDrops to storage.GC.
// The saved view decisions made over the epoch go, every budget's: they
// hold summaries written from its text. So do repair records of its
// messages and kept counts of any of its seqs (a count is a purged text's
// length in tokens; a block of counts that also holds seqs of another
// epoch goes whole, and a manager counts those again when it reads them).
// The learned usage ratio stays: it is one number about the model's way of
// counting, and says nothing of any message's text. The records of other
// epochs stay.
func EpochDrops() []storage.EpochDrop {
	return []storage.EpochDrop{
		{Kind: KindView, Drop: func(key string, p storage.PurgedEpoch) bool { return strings.HasPrefix(key, epochViews(p.Epoch)) }},
		{Kind: KindRepair, Drop: func(key string, p storage.PurgedEpoch) bool { return repairSeqs(key, p.Overlaps) }},
		{Kind: KindCounts, Drop: func(key string, p storage.PurgedEpoch) bool { return countsSeqs(key, p.Overlaps) }},
	}
}

// countsCarried keeps a counts record (CountsKey) when any seq of its block
// is copied.
func countsCarried(key string, c storage.Copied) bool { return countsSeqs(key, c.Overlaps) }

// countsSeqs reports what overlaps says of the seqs of the block of the
// counts record with key (CountsKey); false for a key of another shape.
func countsSeqs(key string, overlaps func(first, last uint64) bool) bool {
	i := strings.LastIndexByte(key, '/')
	block, err := strconv.ParseUint(key[i+1:], 16, 64)
	return i >= 0 && err == nil && overlaps(block*countsBlock, block*countsBlock+countsBlock-1)
}

// repairCarried keeps a repair record (repairKey) when its message is
// copied.
func repairCarried(key string, c storage.Copied) bool { return repairSeqs(key, c.Overlaps) }

// repairSeqs reports what overlaps says of the seq of the message of the
// repair record with key (repairKey); false for a key of another shape.
func repairSeqs(key string, overlaps func(first, last uint64) bool) bool {
	seq, err := strconv.ParseUint(key, 10, 64)
	return err == nil && overlaps(seq, seq)
}

// viewCarried keeps the saved decisions of the copied epoch, every budget's,
// when the whole epoch is copied: they were made over all of it.
func viewCarried(key string, c storage.Copied) bool {
	return c.Whole && strings.HasPrefix(key, epochViews(c.Epoch))
}

// epochViews is the prefix of the keys of the saved decisions of epoch,
// every budget's.
func epochViews(epoch uint64) string { return strings.TrimSuffix(decisionPrefix(epoch), "b") }
