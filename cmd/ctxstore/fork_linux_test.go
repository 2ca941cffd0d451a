package main

import (
	"strings"
	"testing"
	"time"
)

// gc asks on a terminal, as purge does, and deletes only on yes.
func TestGCConfirmsOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		input, stderr string
		code          int
		deleted       bool
	}{
		{"y\n", "for real? [y/N]", 0, true},
		{"n\n", "nothing was deleted", 1, false},
	} {
		e := newEnv(t)
		e.ok(conversation, "add", "s")
		time.Sleep(20 * time.Millisecond)
		r := e.runPTY(ptyRun{stdinTTY: true, input: tc.input}, "gc", "--older-than", "10ms")
		if r.code != tc.code || !strings.Contains(r.stderr+r.stdout, tc.stderr) {
			t.Fatalf("answer %q: want exit %d and %q, got %s", tc.input, tc.code, tc.stderr, r)
		}
		if gone := e.run("", "show", "s").code != 0; gone != tc.deleted {
			t.Errorf("answer %q: deleted %v, want %v", tc.input, gone, tc.deleted)
		}
	}
}
