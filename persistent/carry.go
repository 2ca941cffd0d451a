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
// again). Import records stay with the session that was imported.
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

// countsCarried keeps a counts record (CountsKey) when any seq of its block
// is copied.
func countsCarried(key string, c storage.Copied) bool {
	i := strings.LastIndexByte(key, '/')
	block, err := strconv.ParseUint(key[i+1:], 16, 64)
	return i >= 0 && err == nil && c.Overlaps(block*countsBlock, block*countsBlock+countsBlock-1)
}

// repairCarried keeps a repair record (repairKey) when its message is
// copied.
func repairCarried(key string, c storage.Copied) bool {
	seq, err := strconv.ParseUint(key, 10, 64)
	return err == nil && c.Overlaps(seq, seq)
}

// viewCarried keeps the saved decisions of the copied epoch, every budget's,
// when the whole epoch is copied: they were made over all of it.
func viewCarried(key string, c storage.Copied) bool {
	return c.Whole && strings.HasPrefix(key, strings.TrimSuffix(decisionPrefix(c.Epoch), "b"))
}
