package persistent

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// ForkCarry's rules, at the edges of what a fork copies: seqs 300 to 600
// of epoch 2, whole or a part.
func TestForkCarryRules(t *testing.T) {
	whole := storage.Copied{Epoch: 2, First: 300, Last: 600, Whole: true}
	part := whole
	part.Whole = false
	cases := []struct {
		kind, key string
		c         storage.Copied
		want      bool
	}{
		{KindCounts, CountsKey("o200k_base/1", 0), part, false},   // seqs 0-255
		{KindCounts, CountsKey("o200k_base/1", 299), part, true},  // 256-511 holds 300
		{KindCounts, CountsKey("o200k_base/1", 600), part, true},  // 512-767 holds 600
		{KindCounts, CountsKey("o200k_base/1", 768), part, false}, // 768-1023
		{KindCounts, "o200k_base/1/zz", part, false},
		{KindCounts, "0000000000000001", part, false},
		{KindRepair, repairKey(299), part, false},
		{KindRepair, repairKey(300), part, true},
		{KindRepair, repairKey(600), part, true},
		{KindRepair, repairKey(601), part, false},
		{KindRepair, "x", part, false},
		{KindUsage, usageKey, part, true},
		{KindView, decisionKey(2, 100), whole, true},
		{KindView, decisionKey(2, 100), part, false},
		{KindView, decisionKey(1, 100), whole, false},
		{KindView, decisionKey(20, 100), whole, false},
		{"import", "/x.jsonl", whole, false},
	}
	rules := map[string]storage.Carry{}
	for _, r := range ForkCarry() {
		rules[r.Kind] = r
	}
	for _, c := range cases {
		r, ok := rules[c.kind]
		got := ok && (r.Keep == nil || r.Keep(c.key, c.c))
		if got != c.want {
			t.Errorf("%s %q of %+v: carried %v, want %v", c.kind, c.key, c.c, got, c.want)
		}
	}
}

// EpochDrops' rules, at the edges of a purged epoch 2 of seqs 300 to 600.
func TestEpochDropsRules(t *testing.T) {
	p := storage.PurgedEpoch{Epoch: 2, First: 300, Last: 600}
	cases := []struct {
		kind, key string
		want      bool
	}{
		{KindView, decisionKey(2, 100), true},
		{KindView, decisionKey(2, 3000), true},
		{KindView, decisionKey(1, 100), false},
		{KindView, decisionKey(20, 100), false},
		{KindView, "v2/e2", false},
		{KindCounts, CountsKey("o200k_base/1", 0), false},  // seqs 0-255
		{KindCounts, CountsKey("o200k_base/1", 299), true}, // 256-511 holds 300
		{KindCounts, CountsKey("o200k_base/1", 600), true}, // 512-767 holds 600
		{KindCounts, CountsKey("o200k_base/1", 768), false},
		{KindCounts, "o200k_base/1/zz", false},
		{KindRepair, repairKey(299), false},
		{KindRepair, repairKey(300), true},
		{KindRepair, repairKey(600), true},
		{KindRepair, repairKey(601), false},
		{KindUsage, usageKey, false},
		{"import", "/x.jsonl", false},
	}
	rules := map[string]storage.EpochDrop{}
	for _, r := range EpochDrops() {
		rules[r.Kind] = r
	}
	for _, c := range cases {
		r, ok := rules[c.kind]
		if got := ok && r.Drops(c.key, p); got != c.want {
			t.Errorf("%s %q of %+v: dropped %v, want %v", c.kind, c.key, p, got, c.want)
		}
	}
}
