package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperationsGuide runs the steps of docs/operations.md's "Backups, moves
// and restores" one by one, as an operator would type them, and checks what
// each prints or why it fails, as the guide says.
func TestOperationsGuide(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	at := strings.Index(text, "## Backups, moves and restores")
	if at < 0 {
		t.Fatal(`docs/operations.md has no "Backups, moves and restores" section`)
	}
	start := strings.Index(text[at:], "```sh\n")
	if start < 0 {
		t.Fatal("the section has no sh block")
	}
	block := text[at+start+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]

	e := newEnv(t)
	dir := filepath.Join(e.dir, "guide")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conv := `{"role":"user","content":"What is in the backup?"}
{"role":"assistant","content":"Every message, as of one moment."}
{"role":"user","content":"Thanks."}
`
	if err := os.WriteFile(filepath.Join(dir, "conversation.jsonl"), []byte(conv), 0o600); err != nil {
		t.Fatal(err)
	}
	var last string
	code, steps := 0, 0
	lines := strings.Split(strings.TrimSpace(block), "\n")
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "#   prints: "), strings.HasPrefix(line, "#   fails: "):
			fails := strings.HasPrefix(line, "#   fails: ")
			want := line[strings.Index(line, ": ")+2:]
			if fails != (code != 0) || !strings.Contains(last, want) {
				t.Fatalf("step %q: want %s %q, got exit %d:\n%s", lines[i-1], map[bool]string{true: "a failure saying", false: "output with"}[fails], want, code, last)
			}
		case strings.HasPrefix(line, "# agent: killed after 5 appends to "):
			e.crashAgent(filepath.Join(dir, strings.TrimPrefix(line, "# agent: killed after 5 appends to ")))
		case strings.HasPrefix(line, "#"):
		default:
			steps++
			c := exec.Command("bash", "-c", line)
			c.Dir = dir
			c.Env = []string{"HOME=" + e.dir, "PATH=" + filepath.Dir(binary) + ":" + os.Getenv("PATH"), "TZ=UTC"}
			out, err := c.CombinedOutput()
			last, code = string(out), 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			next := ""
			if i+1 < len(lines) {
				next = lines[i+1]
			}
			if code != 0 && !strings.HasPrefix(next, "#   fails: ") {
				t.Fatalf("step %q: exit %d:\n%s", line, code, last)
			}
		}
	}
	if steps < 10 {
		t.Fatalf("only %d steps found in the guide", steps)
	}
}
