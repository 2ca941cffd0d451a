package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hostileText is stored text that would act on a terminal printed raw:
// a window title change, a screen clear, an OSC 52 clipboard write, a C1
// CSI colour change, a bidi override, a backspace and a carriage return.
const hostileText = `set title \u001b]0;pwned\u0007 clear \u001b[2J clip \u001b]52;c;cHduZWQ=\u0007 c1 \u009b31m bidi \u202eevil bs \u0008 cr \r\nsecond line\tafter tab`

// rawTerminalControls lists what must never reach a terminal from stored
// text, and what it looks like in a failure message.
var rawTerminalControls = map[string]string{
	"\x1b": "ESC", "\x07": "BEL", "\x08": "BS", "\r": "CR", "\u009b": "C1 CSI", "\u202e": "RLO",
}

// Stored escape sequences are printed visibly escaped by every command that
// prints messages or session names for people, newlines and tabs of
// multi-line text kept; --json output carries them JSON-escaped.
func TestStoredEscapesNeverReachTheTerminal(t *testing.T) {
	e := newEnv(t)
	session := "evil\x1b]0;name\x07"
	e.ok(`{"role":"user","content":"`+hostileText+`"}`, "add", session)
	e.ok(`{"role":"assistant","content":null,"tool_calls":[{"id":"call\u001b[1m","type":"function","function":{"name":"run\u001b[2J","arguments":"\"\\u001b]52;c;eA==\\u0007\""}}]}`, "add", session)

	check := func(t *testing.T, what, out string, multiline bool, visible ...string) {
		t.Helper()
		for c, name := range rawTerminalControls {
			if strings.Contains(out, c) {
				t.Errorf("%s prints a raw %s:\n%q", what, name, out)
			}
		}
		for _, v := range visible {
			if !strings.Contains(out, v) {
				t.Errorf("%s does not show %s:\n%s", what, v, out)
			}
		}
		if multiline && !strings.Contains(out, "    second line\tafter tab") {
			t.Errorf("%s lost the text's newline or tab:\n%s", what, out)
		}
	}
	escaped := []string{`\x1b]52;c;cHduZWQ=\x07`, `\u202eevil`}
	for _, tc := range []struct {
		args      []string
		multiline bool
		visible   []string
	}{
		{[]string{"ls"}, false, []string{`evil\x1b]0;name\x07`, `\x1b]0;pwned\x07`}},
		{[]string{"show", session}, true, escaped},
		{[]string{"tail", session}, true, escaped},
		{[]string{"view", session, "--budget", "4000"}, false, escaped},
		{[]string{"view", session, "--budget", "4000", "--full"}, true, escaped},
	} {
		t.Run(strings.Join(tc.args[:1], " "), func(t *testing.T) {
			r := e.ok("", tc.args...)
			check(t, strings.Join(tc.args, " "), r.stdout, tc.multiline, tc.visible...)
			if tc.args[0] != "ls" && (strings.Contains(r.stdout, "\x1b[1m") || strings.Contains(r.stdout, "\x1b[2J")) {
				t.Errorf("tool call name or id printed raw:\n%q", r.stdout)
			}
		})
	}

	t.Run("tail -f", func(t *testing.T) {
		_, lines, stderr := e.start("tail", "-f", "-n", "0", session)
		time.Sleep(300 * time.Millisecond) // watching
		e.ok(`{"role":"user","content":"`+hostileText+`"}`, "add", session)
		var out strings.Builder
		deadline := time.After(20 * time.Second)
		for !strings.Contains(out.String(), "second line") {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("tail -f ended; stderr: %s", stderr)
				}
				out.WriteString(l + "\n")
			case <-deadline:
				t.Fatalf("tail -f printed only %q in 20 s", out.String())
			}
		}
		check(t, "tail -f", out.String(), true, escaped...)
	})

	// JSON escapes what JSON forbids raw; stored JSON cannot hold a raw
	// ESC at all (add refuses it). ls --json escapes what JSON allows raw
	// but a terminal acts on (the title holds a C1 CSI and an RLO).
	for _, args := range [][]string{{"ls", "--json"}, {"show", session, "--json"}, {"show", session, "--jsonl"}} {
		if out := e.ok("", args...).stdout; strings.ContainsAny(out, "\x1b\x07\x08\r") {
			t.Errorf("%v prints raw control characters:\n%q", args, out)
		}
	}
	if out := e.ok("", "ls", "--json").stdout; strings.ContainsAny(out, "\u009b\u202e") || !strings.Contains(out, `\u009b31m`) {
		t.Errorf("ls --json prints a raw C1 control or bidi override:\n%q", out)
	}
	e.fail(1, "{\"role\":\"user\",\"content\":\"raw \x1b[2J\"}", []string{"add", session}, "invalid character")
}

// On a terminal, --jsonl lines still parse as the same JSON but carry C1
// controls and bidi overrides as \u escapes; piped, they are the stored bytes.
func TestJSONLOnTerminalEscapesC1AndBidi(t *testing.T) {
	scriptPath, err := exec.LookPath("script")
	if err != nil {
		t.Skip("needs util-linux script(1) to run the command on a pseudo-terminal")
	}
	e := newEnv(t)
	stored := `{"role":"user","content":"c1 ` + "\u009b" + `31m bidi ` + "\u202e" + `evil"}`
	e.ok(stored, "add", "s")
	if out := e.ok("", "show", "s", "--jsonl").stdout; out != stored+"\n" {
		t.Fatalf("piped --jsonl changed the stored bytes:\n%q\nwant\n%q", out, stored+"\n")
	}
	for _, args := range [][]string{{"show", "s", "--jsonl"}, {"tail", "s", "--jsonl"}, {"view", "s", "--budget", "4000", "--jsonl"}} {
		cmdline := binary + " " + strings.Join(args, " ")
		cmd := exec.Command(scriptPath, "-qec", cmdline, "/dev/null")
		cmd.Env = e.vars
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v on a terminal: %v", args, err)
		}
		got := strings.TrimSpace(strings.ReplaceAll(string(out), "\r", ""))
		if strings.ContainsAny(got, "\u009b\u202e") {
			t.Errorf("%v printed a raw C1 control or bidi override to a terminal: %q", args, got)
		}
		var a, b map[string]any
		if err := json.Unmarshal([]byte(got), &a); err != nil {
			t.Fatalf("%v on a terminal is not JSON: %v: %q", args, err, got)
		}
		_ = json.Unmarshal([]byte(stored), &b)
		if a["content"] != b["content"] {
			t.Errorf("%v on a terminal changed the content: %q", args, a["content"])
		}
	}
}
