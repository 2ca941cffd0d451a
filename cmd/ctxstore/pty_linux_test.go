package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal of cols columns: the command gets the
// terminal side, the test talks to it through the controller side.
func openPTY(t *testing.T, cols uint16) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return ctl, tty
}

// ptyRun is one run of the command with some of its streams on a terminal.
type ptyRun struct {
	stdinTTY, stdoutTTY bool
	cols                uint16
	input               string // typed on the terminal (stdinTTY) or piped
	stdinNull           bool   // stdin is /dev/null (a character device, not a terminal)
}

// runPTY runs the command as set up by p and returns what it did; the
// terminal's output (stdout when stdoutTTY, and the echo of the input) is
// in result.stdout, with the terminal's \r\n turned back into \n.
func (e *env) runPTY(p ptyRun, args ...string) result {
	e.t.Helper()
	ctl, tty := openPTY(e.t, cmpOr(p.cols, 80))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env, cmd.Dir = e.vars, e.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	switch {
	case p.stdinTTY:
		cmd.Stdin = tty
	case p.stdinNull:
		null, err := os.Open(os.DevNull)
		if err != nil {
			e.t.Fatal(err)
		}
		defer null.Close()
		cmd.Stdin = null
	default:
		cmd.Stdin = strings.NewReader(p.input)
	}
	if p.stdoutTTY {
		cmd.Stdout = tty
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	tty.Close() // the child holds it now; reads of ctl end when it exits
	copied := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ctl) // ends with EIO once no process has the terminal open
		copied <- b
	}()
	if p.stdinTTY {
		// Typed after the command started waiting, as a person would.
		time.Sleep(200 * time.Millisecond)
		ctl.WriteString(p.input)
	}
	err := cmd.Wait()
	term := <-copied
	stdout := out.String()
	if p.stdoutTTY || p.stdinTTY {
		stdout += strings.ReplaceAll(string(term), "\r\n", "\n")
	}
	return e.result(args, stdout, errb.String(), err)
}

func cmpOr(v, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return v
}

// TestPurgeConfirmsOnlyOnATerminal: purge asks on a terminal and deletes
// only on "y"; anywhere else (/dev/null, a pipe) it needs --yes or -y.
func TestPurgeConfirmsOnlyOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		run    ptyRun
		args   []string
		code   int
		stderr string
		purged bool
	}{
		{"terminal, yes", ptyRun{stdinTTY: true, input: "y\n"}, nil, 0, "for real? [y/N]", true},
		{"terminal, no", ptyRun{stdinTTY: true, input: "n\n"}, nil, 1, "nothing was purged", false},
		{"/dev/null", ptyRun{stdinNull: true}, nil, 2, "stdin is not a terminal to confirm on: add --yes (or -y)", false},
		{"pipe", ptyRun{input: "y\n"}, nil, 2, "add --yes", false},
		{"/dev/null with -y", ptyRun{stdinNull: true}, []string{"-y"}, 0, "", true},
		{"pipe with --yes", ptyRun{}, []string{"--yes"}, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.ok(conversation, "add", "s")
			r := e.runPTY(tc.run, append([]string{"purge", "s"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("want exit %d and %q on stderr, got %s", tc.code, tc.stderr, r)
			}
			gone := e.run("", "show", "s").code != 0
			if gone != tc.purged {
				t.Errorf("session purged: %v, want %v", gone, tc.purged)
			}
		})
	}
}

// TestAddHintsOnATerminal: add waiting on a terminal says what it waits
// for; fed by a pipe it says nothing.
func TestAddHintsOnATerminal(t *testing.T) {
	const hint = "reading JSON messages from stdin; end with Ctrl-D"
	e := newEnv(t)
	r := e.runPTY(ptyRun{stdinTTY: true, input: `{"role":"user","content":"typed"}` + "\n\x04"}, "add", "s")
	if r.code != 0 || !strings.Contains(r.stderr, hint) {
		t.Fatalf("add on a terminal: want exit 0 and the hint, got %s", r)
	}
	if got := e.ok("", "show", "s", "--jsonl").stdout; got != `{"role":"user","content":"typed"}`+"\n" {
		t.Errorf("stored %q", got)
	}
	if r := e.ok(`{"role":"user","content":"piped"}`, "add", "s"); strings.Contains(r.stderr, hint) {
		t.Errorf("add from a pipe printed the hint:\n%s", r)
	}
}

// TestDemoFitsTheTerminal: no line of the demo is wider than the terminal
// it prints on; printed to a pipe, its lines are whole (an event's JSON
// on its line, never wrapped mid-key).
func TestDemoFitsTheTerminal(t *testing.T) {
	for _, cols := range []uint16{0, 60, 100} {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			e := newEnv(t)
			var r result
			width := 80
			if cols == 0 {
				r = e.ok("", "demo")
			} else {
				width = int(cols)
				r = e.runPTY(ptyRun{stdoutTTY: true, cols: cols}, "demo")
			}
			if r.code != 0 || !strings.Contains(r.stdout, "demo done") {
				t.Fatalf("demo: %s", r)
			}
			if cols == 0 {
				events := 0
				for _, l := range strings.Split(r.stdout, "\n") {
					if rest, ok := strings.CutPrefix(l, "   event "); ok {
						_, data, _ := strings.Cut(rest, " ")
						if events++; !json.Valid([]byte(data)) {
							t.Errorf("piped event line is not whole: %q", l)
						}
					}
				}
				if events == 0 {
					t.Errorf("piped demo shows no events:\n%s", r.stdout)
				}
				return
			}
			widest := 0
			for _, l := range strings.Split(r.stdout, "\n") {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("line of %d columns on a %d-column terminal: %q", n, width, l)
				} else {
					widest = max(widest, n)
				}
			}
			if widest < width-10 {
				t.Errorf("the widest line has %d columns: the demo does not use a %d-column terminal", widest, width)
			}
		})
	}
}
