package main

import (
	"strings"
	"testing"
)

// TestEraseConfirms: on a terminal erase asks, and does nothing unless
// the answer is yes.
func TestEraseConfirms(t *testing.T) {
	e := newEnv(t)
	e.ok(`{"role":"user","content":"hello bilbyX1"}`+"\n", "add", "s")
	r := e.runPTY(ptyRun{stdinTTY: true, input: "n\n"}, "erase", "s", "1")
	if r.code != 1 || !strings.Contains(r.stderr+r.stdout, "for real? [y/N]") {
		t.Fatalf("answered no: %s", r)
	}
	if r := e.ok("", "show", "s"); !strings.Contains(r.stdout, "bilbyX1") {
		t.Fatalf("erased though the answer was no:\n%s", r.stdout)
	}
	if r := e.runPTY(ptyRun{stdinTTY: true, input: "y\n"}, "erase", "s", "1"); r.code != 0 {
		t.Fatalf("answered yes: %s", r)
	}
	if r := e.ok("", "show", "s"); strings.Contains(r.stdout, "bilbyX1") {
		t.Fatalf("not erased after yes:\n%s", r.stdout)
	}
}
