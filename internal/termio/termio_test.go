package termio

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
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
			p := &Progress{W: &buf, Label: "importing", Total: tc.total}
			p.Update(2<<20, 1000)
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("bar %q lacks %q", buf.String(), w)
				}
			}
			p.Update(3<<20, 1500) // within 100 ms: not redrawn
			if strings.Count(buf.String(), "\r") != 1 {
				t.Errorf("redrawn too often: %q", buf.String())
			}
			p.Finish()
			if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
				t.Errorf("finish did not erase the bar: %q", buf.String())
			}
		})
	}
}

// TestJSONArray: the streamed array is what WriteJSON writes of the slice.
func TestJSONArray(t *testing.T) {
	type item struct {
		Name string         `json:"name"`
		M    map[string]int `json:"m,omitempty"`
	}
	for _, items := range [][]item{nil, {{Name: "a"}}, {{Name: "a<b>", M: map[string]int{"x": 1}}, {Name: "é"}}} {
		var want, got bytes.Buffer
		if err := WriteJSON(&want, append([]item{}, items...)); err != nil {
			t.Fatal(err)
		}
		arr := &JSONArray{W: &got}
		for _, it := range items {
			if err := arr.Add(it); err != nil {
				t.Fatal(err)
			}
		}
		if err := arr.Close(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("streamed\n%s\nwant\n%s", got.String(), want.String())
		}
	}
}

// TestReadMessages: an object, an array and JSON Lines are read; invalid
// messages are listed by line and match ctxstore.ErrInvalidMessage.
func TestReadMessages(t *testing.T) {
	for _, in := range []string{
		`{"role":"user","content":"a"}`,
		`[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]`,
		"{\"role\":\"user\",\"content\":\"a\"}\n\n{\"role\":\"assistant\",\"content\":\"b\"}\n",
	} {
		if msgs, err := ReadMessages(strings.NewReader(in), "stdin", 1<<20); err != nil || len(msgs) == 0 {
			t.Errorf("ReadMessages(%q) = %d messages, %v", in, len(msgs), err)
		}
	}
	_, err := ReadMessages(strings.NewReader("{\"role\":\"user\",\"content\":\"a\"}\nnot json\n"), "stdin", 1<<20)
	if !errors.Is(err, ctxstore.ErrInvalidMessage) || !strings.Contains(err.Error(), "stdin line 2") {
		t.Errorf("an invalid line: %v", err)
	}
}
