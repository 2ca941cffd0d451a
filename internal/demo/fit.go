package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Play runs the walk-through as 'ctxstore demo' does: in a temporary
// directory, removed at the end, unless env.Kept (then on env.Path), with
// its memory file there, and its text written to env.Out fitted to width
// columns (0: lines as they are). env.Failed and env.MemoryFile are Play's
// to set.
func Play(ctx context.Context, env Env, width int) error {
	tmp, err := os.MkdirTemp("", "ctxstore-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	// A reader that goes away (demo | head -1) makes writes fail with
	// EPIPE instead of killing the process, so the directory above is
	// removed; the demo then stops.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	// On a terminal every line fits its width: prose wraps, the view's
	// one-line message rows are cut. Piped output keeps its lines whole.
	out := &fitWriter{w: env.Out, width: width, cut: func(l string) bool { return strings.HasPrefix(l, "#") }}
	defer out.Flush()
	env.Out, env.Failed = out, func() error { return out.err }
	env.MemoryFile = filepath.Join(tmp, "USER.md")
	if !env.Kept {
		env.Path = filepath.Join(tmp, "demo.db")
	}
	if err := os.WriteFile(env.MemoryFile, []byte("The user is Ana. She runs a home server called 'pantry' (Debian) and prefers short answers.\n"), 0o600); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := Run(ctx, env); err != nil {
		return err
	}
	return out.Flush()
}

// fitWriter writes whole lines no wider than width columns (one per rune):
// a longer line is cut with "…" when cut says so, else wrapped at spaces,
// its continuation lines indented two columns beyond the line's own
// indentation. Flush writes a last, unterminated line.
type fitWriter struct {
	w     io.Writer
	width int
	cut   func(line string) bool
	buf   []byte
	err   error
}

func (f *fitWriter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for f.err == nil {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		f.line(string(f.buf[:i]), true)
		f.buf = f.buf[i+1:]
	}
	return len(p), f.err
}

// Flush writes what is buffered.
func (f *fitWriter) Flush() error {
	if len(f.buf) > 0 && f.err == nil {
		f.line(string(f.buf), false)
		f.buf = f.buf[:0]
	}
	return f.err
}

func (f *fitWriter) line(s string, newline bool) {
	var out strings.Builder
	for i, l := range fitLine(s, f.width, f.cut != nil && f.cut(s)) {
		if i > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(l)
	}
	if newline {
		out.WriteByte('\n')
	}
	_, f.err = io.WriteString(f.w, out.String())
}

// fitLine splits (or cuts) s into lines of at most width runes.
func fitLine(s string, width int, cut bool) []string {
	r := []rune(s)
	if len(r) <= width || width < 8 {
		return []string{s}
	}
	if cut {
		return []string{string(r[:width-1]) + "…"}
	}
	lead := 0
	for lead < len(r) && r[lead] == ' ' {
		lead++
	}
	cont := []rune(strings.Repeat(" ", min(lead+2, width/2)))
	var lines []string
	for first := true; len(r) > width; first = false {
		start := len(cont)
		if first {
			start = lead
		}
		at := -1
		for i := width; i > start; i-- {
			if r[i] == ' ' {
				at = i
				break
			}
		}
		next := at + 1
		if at < 0 { // one long word: break it
			at, next = width, width
		}
		lines = append(lines, strings.TrimRight(string(r[:at]), " "))
		rest := r[next:]
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		r = append(slices.Clone(cont), rest...)
	}
	return append(lines, string(r))
}
