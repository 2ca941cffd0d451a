package ctxstore_test

import (
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// benchMessages are typical stored messages of about 1 KiB.
var benchMessages = [][]byte{
	[]byte(`{"role":"user","content":"` + strings.Repeat("please check the backups on pantry ", 30) + `","timestamp":"2026-11-22T05:51:32Z"}`),
	[]byte(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run_command","arguments":"{\"command\":\"journalctl --since today\",\"host\":\"pantry\"}"}}]}`),
	[]byte(`{"role":"tool","tool_call_id":"call_1","content":"` + strings.Repeat("2026-11-22 03:00:00 pantry backup ok\\n", 25) + `"}`),
}

// BenchmarkParse compares the full parse of input from outside with the
// parse of bytes read back from a store (resume reads thousands of them).
func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name  string
		parse func([]byte) (ctxstore.Message, error)
	}{{"ParseMessage", ctxstore.ParseMessage}, {"ParseStored", ctxstore.ParseStored}} {
		b.Run(bc.name, func(b *testing.B) {
			var n int64
			for _, m := range benchMessages {
				n += int64(len(m))
			}
			b.SetBytes(n / int64(len(benchMessages)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := bc.parse(benchMessages[i%len(benchMessages)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
