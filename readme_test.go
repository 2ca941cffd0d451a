package ctxstore_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeEmbeddingExampleCompiles: the README's first Go example builds
// with imports of ctxstore and persistent only (and context), as a new
// user would paste it into an agent loop.
func TestReadmeEmbeddingExampleCompiles(t *testing.T) {
	goCmd, readme := readmeAndGo(t)
	text := string(readme)
	at := strings.Index(text, "## Embedding it in an agent loop")
	if at < 0 {
		t.Fatal("README has no embedding section")
	}
	start := strings.Index(text[at:], "```go\n")
	if start < 0 {
		t.Fatal("the embedding section has no Go example")
	}
	body := text[at+start+len("```go\n"):]
	_, body = splitImports(body[:strings.Index(body, "```")])
	src := `package readmeexample

import (
	"context"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
)

func callModel(context.Context, []ctxstore.Message) ctxstore.Message { return ctxstore.Message{} }

func run(ctx context.Context, userInputs chan string) error {
` + body + `	return nil
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "example.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	virtual := filepath.Join(wd, "internal", "readmeexample", "example.go")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{virtual: file}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goCmd, "build", "-overlay", ov, "./internal/readmeexample")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's embedding example does not build with ctxstore and persistent alone: %v\n%s\n%s", err, out, src)
	}
}
