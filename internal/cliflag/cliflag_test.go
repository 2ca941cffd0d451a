package cliflag

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
	"time"
)

// TestParseFlags: the CLI's own flag parser takes flags and arguments in
// any order and says what is wrong with a flag by kind, not by message.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		stopAtArg bool
		pos       []string
		n         int
		json      bool
		wait      time.Duration
		problem   ProblemKind
		help      bool
		failed    bool
	}{
		{name: "interleaved", args: []string{"a", "-n", "3", "--json", "b"}, pos: []string{"a", "b"}, n: 3, json: true},
		{name: "equals", args: []string{"--n=4", "--json=false", "--wait=2s"}, n: 4, wait: 2 * time.Second},
		{name: "dash dash", args: []string{"--json", "--", "-n", "x"}, pos: []string{"-n", "x"}, json: true},
		{name: "lone dash is an argument", args: []string{"-", "-n", "1"}, pos: []string{"-"}, n: 1},
		{name: "stop at argument", args: []string{"--json", "show", "-n", "2"}, stopAtArg: true, pos: []string{"show", "-n", "2"}, json: true},
		{name: "unknown", args: []string{"--nope"}, failed: true, problem: Unknown},
		{name: "no value", args: []string{"a", "-n"}, failed: true, problem: NoValue},
		{name: "bad value", args: []string{"-n", "x"}, failed: true, problem: BadValue},
		{name: "bad bool", args: []string{"--json=maybe"}, failed: true, problem: BadValue},
		{name: "bad duration", args: []string{"--wait", "5"}, failed: true, problem: BadValue},
		{name: "syntax", args: []string{"---n"}, failed: true, problem: Syntax},
		{name: "help", args: []string{"a", "--help"}, failed: true, help: true},
		{name: "h", args: []string{"-h"}, failed: true, help: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			n := fs.Int("n", 0, "")
			json := fs.Bool("json", false, "")
			wait := fs.Duration("wait", 0, "")
			pos, err := Parse(fs, tc.args, tc.stopAtArg)
			if tc.failed {
				p, ok := errors.AsType[*Problem](err)
				switch {
				case tc.help && !errors.Is(err, flag.ErrHelp):
					t.Fatalf("Parse(%q) = %v, want flag.ErrHelp", tc.args, err)
				case !tc.help && (!ok || p.Kind != tc.problem):
					t.Fatalf("Parse(%q) = %v, want a problem of kind %d", tc.args, err, tc.problem)
				}
				return
			}
			if err != nil || !slices.Equal(pos, tc.pos) || *n != tc.n || *json != tc.json || *wait != tc.wait {
				t.Fatalf("Parse(%q) = %q, %v; -n %d --json %v --wait %v", tc.args, pos, err, *n, *json, *wait)
			}
		})
	}
}
