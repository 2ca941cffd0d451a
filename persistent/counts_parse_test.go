package persistent

import (
	"encoding/json"
	"maps"
	"testing"
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
