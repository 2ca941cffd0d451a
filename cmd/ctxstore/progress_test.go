package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressBar(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int64
		want  []string
	}{
		{"known size", 4 << 20, []string{"importing [", "50%", "2.0 MiB / 4.0 MiB", "1000 messages"}},
		{"stdin", 0, []string{"importing 2.0 MiB", "1000 messages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := &progress{w: &buf, label: "importing", total: tc.total}
			p.update(2<<20, 1000)
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("bar %q lacks %q", buf.String(), w)
				}
			}
			p.update(3<<20, 1500) // within 100 ms: not redrawn
			if strings.Count(buf.String(), "\r") != 1 {
				t.Errorf("redrawn too often: %q", buf.String())
			}
			p.finish()
			if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
				t.Errorf("finish did not erase the bar: %q", buf.String())
			}
		})
	}
	// Not a terminal: nothing at all.
	var buf bytes.Buffer
	a := &app{stderr: &buf, getenv: func(string) string { return "" }}
	p := a.newProgress("importing", 100)
	p.latency = 0
	p.update(50, 1)
	p.finish()
	if buf.Len() != 0 {
		t.Errorf("progress on a non-terminal wrote %q", buf.String())
	}
}
