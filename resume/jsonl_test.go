package resume

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func collect(t *testing.T, r io.Reader, maxLine int) (msgs []string, bad map[int]string) {
	t.Helper()
	bad = map[int]string{}
	for ln, err := range readJSONL(r, maxLine) {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if ln.Err != nil {
			bad[ln.No] = ln.Err.Error()
			continue
		}
		msgs = append(msgs, string(ln.Msg.Bytes()))
	}
	return msgs, bad
}

func TestReadJSONLLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		msgs []string
		bad  map[int]string // line -> substring of the reason
	}{
		{"empty", "", nil, nil},
		{"blank lines only", "\n \n\t\r\n", nil, nil},
		{"crlf and no final newline",
			"{\"role\":\"user\"}\r\n\r\n{\"role\":\"assistant\",\"content\":\"x\"}",
			[]string{`{"role":"user"}`, `{"role":"assistant","content":"x"}`}, nil},
		{"byte-order mark", "\ufeff{\"role\":\"system\"}\n\ufeff{\"role\":\"user\"}\n",
			[]string{`{"role":"system"}`}, map[int]string{2: "not valid JSON"}},
		{"extra keys kept",
			`{"role": "user", "content": "hi", "timestamp": "2025-10-14T09:12:03.512+00:00"}` + "\n",
			[]string{`{"role": "user", "content": "hi", "timestamp": "2025-10-14T09:12:03.512+00:00"}`}, nil},
		{"malformed reported by line",
			"{\"role\":\"user\"}\n{\"role\": \"assistant\", \"content\": \"I will\n\n{\"content\":\"x\"}\n[1]\n{\"role\":\"tool\"}\n{\"role\":\"user\"} trailing\n",
			[]string{`{"role":"user"}`},
			map[int]string{2: "not valid JSON", 4: `"role": missing`, 5: "not a JSON object", 6: "tool_call_id", 7: "trailing data"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bad := collect(t, strings.NewReader(tt.in), 0)
			if strings.Join(msgs, "\n") != strings.Join(tt.msgs, "\n") {
				t.Errorf("messages = %q, want %q", msgs, tt.msgs)
			}
			if len(bad) != len(tt.bad) {
				t.Errorf("malformed = %v, want lines %v", bad, tt.bad)
			}
			for no, want := range tt.bad {
				if !strings.Contains(bad[no], want) {
					t.Errorf("line %d: reason %q, want it to mention %q", no, bad[no], want)
				}
			}
		})
	}
}

// Real transcripts hold tool results of many megabytes on one line;
// bufio.Scanner's default 64 KiB token limit would fail them.
func TestReadJSONLLongLines(t *testing.T) {
	big := `{"role":"tool","tool_call_id":"c1","content":"` + strings.Repeat("x", 5<<20) + `"}`
	in := `{"role":"user","content":"go"}` + "\n" + big + "\n" + `{"role":"user","content":"after"}` + "\n"
	msgs, bad := collect(t, iotest.HalfReader(strings.NewReader(in)), 0)
	if len(bad) != 0 || len(msgs) != 3 || msgs[1] != big {
		t.Fatalf("got %d messages (middle %d bytes), malformed %v", len(msgs), len(msgs[1]), bad)
	}
	// Over the limit: reported with its size, and the next line still counts.
	msgs, bad = collect(t, strings.NewReader(in), 1<<20)
	if len(msgs) != 2 || !strings.Contains(bad[2], "over the limit") {
		t.Fatalf("with a 1 MiB limit: messages %q, malformed %v", msgs, bad)
	}
	// A huge blank line is still blank.
	msgs, bad = collect(t, strings.NewReader(strings.Repeat(" ", 200<<10)+"\n"+`{"role":"user"}`), 1<<10)
	if len(msgs) != 1 || len(bad) != 0 {
		t.Fatalf("huge blank line: messages %q, malformed %v", msgs, bad)
	}
}

func TestReadJSONLReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("{\"role\":\"user\"}\n"), iotest.ErrReader(boom))
	n := 0
	var got error
	for ln, err := range readJSONL(r, 0) {
		if err != nil {
			got = err
			break
		}
		n++
		_ = ln
	}
	if n != 1 || !errors.Is(got, boom) || !strings.Contains(got.Error(), "after line 1") {
		t.Fatalf("lines %d, error %v", n, got)
	}
}

func TestReadJSONLStopsWhenAsked(t *testing.T) {
	in := bytes.Repeat([]byte("{\"role\":\"user\"}\n"), 10)
	n := 0
	for range readJSONL(bytes.NewReader(in), 0) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("n = %d", n)
	}
}
