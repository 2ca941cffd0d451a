package persistent

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// TestParseCountsMatchesEncodingJSON: the counts record decoder reads what
// json.Marshal writes, and whatever else encoding/json reads, the same way.
func TestParseCountsMatchesEncodingJSON(t *testing.T) {
	written, err := json.Marshal(map[uint64]int{1: 5, 256: 0, 300: 41, 1<<63 + 7: 2, 99: 123456})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"as written", string(written)},
		{"empty", `{}`},
		{"one", `{"7":3}`},
		{"spaces", `{ "7" : 3 , "8":4 }`},
		{"negative", `{"7":-3}`},
		{"not an object", `[1,2]`},
		{"truncated", `{"7":3`},
		{"trailing comma", `{"7":3,}`},
		{"garbage", `nonsense`},
		{"nothing", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[uint64]int{}
			if json.Unmarshal([]byte(tc.in), &want) != nil {
				want = map[uint64]int{}
			}
			if got := parseCounts([]byte(tc.in)); !maps.Equal(got, want) {
				t.Errorf("parseCounts(%s) = %v, encoding/json reads %v", tc.in, got, want)
			}
		})
	}
}

// TestLoadedCountBlocks: blocks of kept counts read with the messages
// (recounts.loaded) hold what readCountBlock would read: the record's
// counts of its own block, none for a block without a record or with an
// unreadable one.
func TestLoadedCountBlocks(t *testing.T) {
	k0, k1, k2 := CountsKey("c", 5), CountsKey("c", countsBlock+5), CountsKey("c", 2*countsBlock)
	var r recounts
	r.loaded([]string{k0, k1, k2}, []storage.Derived{
		{Kind: KindCounts, Key: k1, Value: []byte(`{"261":7,"5":9}`)},
		{Kind: KindCounts, Key: k2, Value: []byte(`{"512":`)},
	})
	for _, tc := range []struct {
		key  string
		seq  uint64
		want int
		ok   bool
	}{
		{k0, 5, 0, false},
		{k1, countsBlock + 5, 7, true},
		{k1, countsBlock + 6, 0, false},
		{k2, 2 * countsBlock, 0, false},
	} {
		b := r.blocks[tc.key]
		if b == nil {
			t.Fatalf("block %s not kept", tc.key)
		}
		if got, ok := b.get(tc.seq); ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("block %s seq %d = %d, %v; want %d, %v", tc.key, tc.seq, got, ok, tc.want, tc.ok)
		}
	}
}
