package main

import (
	"bytes"
	"testing"
)

// TestProgressBarNotOnPipes: a bar on stderr that is not a terminal draws
// nothing at all.
func TestProgressBarNotOnPipes(t *testing.T) {
	// Not a terminal: nothing at all.
	var buf bytes.Buffer
	a := &app{stderr: &buf, getenv: func(string) string { return "" }}
	p := a.newProgress("importing", 100)
	p.Latency = 0
	p.Update(50, 1)
	p.Finish()
	if buf.Len() != 0 {
		t.Errorf("progress on a non-terminal wrote %q", buf.String())
	}
}
