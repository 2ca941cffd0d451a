package resume

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
)

// FuzzIngestJSONL feeds arbitrary bytes to the JSONL import path (reader,
// batching, accounting) with an in-memory sink. Properties: no panic; every
// non-blank line is imported or reported, never both and never lost; an
// imported message holds exactly the line's bytes (surrounding whitespace
// aside); line numbers are right.
func FuzzIngestJSONL(f *testing.F) {
	for _, s := range []string{
		"",
		"\n\n",
		`{"role":"user","content":"hi"}`,
		"{\"role\":\"user\",\"content\":\"hi\"}\r\n\r\n{\"role\":\"assistant\",\"content\":null}\n",
		"{\"role\": \"assistant\", \"content\": \"I will che\n{\"content\":\"x\"}\n[1,2]\n42\n",
		"{\"role\":\"tool\",\"content\":\"x\"}\n{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"x\"}",
		"  \t \n\v\f\n\u00a0\n{\"role\":\"user\"}   \n",
	} {
		f.Add([]byte(s))
	}
	// The Amplifier fixtures are seeds too, so mutations start from real
	// transcripts.
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "amplifier", "projects", "*", "sessions", "*", JSONLName))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, maxLine := range []int{0, 64} {
			checkImport(t, data, maxLine)
		}
	})
}

func checkImport(t *testing.T, data []byte, maxLine int) {
	var got []ctxstore.Message
	sink := func(_ context.Context, b []ctxstore.Message) error {
		got = append(got, b...)
		return nil
	}
	lines, sent, bad, err := pump(context.Background(), bytes.NewReader(data), maxLine, 3, 1<<10, nil, sink, nil)
	if err != nil {
		t.Fatalf("pump: %v", err)
	}
	if sent != len(got) {
		t.Fatalf("sent %d, sink got %d", sent, len(got))
	}

	// The oracle: split on \n independently of bufio.
	raw := bytes.Split(data, []byte("\n"))
	if len(raw[len(raw)-1]) == 0 {
		raw = raw[:len(raw)-1] // the final newline ends a line, it does not start one
	}
	nonBlank := 0
	bi, gi := 0, 0
	for i, l := range raw {
		trimmed := l
		if i == 0 {
			trimmed = bytes.TrimPrefix(trimmed, []byte("\xef\xbb\xbf"))
		}
		trimmed = bytes.TrimSpace(trimmed)
		if len(trimmed) == 0 {
			continue
		}
		nonBlank++
		no := i + 1
		if bi < len(bad) && bad[bi].Line == no {
			bi++
			continue
		}
		if gi >= len(got) {
			t.Fatalf("line %d (%q) neither imported nor reported", no, l)
		}
		size := len(l)
		if i < len(raw)-1 || bytes.HasSuffix(data, []byte("\n")) {
			size++
		}
		if maxLine > 0 && size > maxLine {
			t.Fatalf("line %d is %d bytes, over %d, but was imported", no, size, maxLine)
		}
		if !bytes.Equal(got[gi].Bytes(), trimmed) {
			t.Fatalf("line %d imported as %q, want %q", no, got[gi].Bytes(), trimmed)
		}
		if _, err := ctxstore.ParseMessage(trimmed); err != nil {
			t.Fatalf("line %d imported but invalid: %v", no, err)
		}
		gi++
	}
	if bi != len(bad) || gi != len(got) {
		t.Fatalf("reported %d (matched %d), imported %d (matched %d): extra entries; bad=%v", len(bad), bi, len(got), gi, bad)
	}
	if lines != nonBlank || len(got)+len(bad) != nonBlank {
		t.Fatalf("lines=%d imported=%d malformed=%d, want %d non-blank lines", lines, len(got), len(bad), nonBlank)
	}
	for _, b := range bad {
		if b.Err == "" {
			t.Fatalf("line %d reported without a reason", b.Line)
		}
	}
}
