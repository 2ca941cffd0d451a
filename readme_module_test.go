package ctxstore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeSnippet says how TestReadmeModule compiles a README snippet that
// contains key: as the body of a function with these parameters (the
// names the snippet uses without declaring them), followed by trailer.
type readmeSnippet struct{ key, params, trailer string }

var readmeSnippets = []readmeSnippet{
	{"for input := range userInputs", "ctx context.Context, userInputs chan string, callModel func(context.Context, []ctxstore.Message) ctxstore.Message", "return nil"},
	{"pgstore.Open(", "ctx context.Context", "_ = m\n\treturn err"},
	{"ExtraTokens: toolSchemaTokens", "ctx context.Context, m *persistent.Manager, model *ctxstore.ModelInfo, toolSchemaTokens int, callModel func(context.Context, []ctxstore.Message) struct{ Usage struct{ InputTokens int } }", "return nil"},
	{"anthropicview.Params(", "ctx context.Context, m *persistent.Manager, model *ctxstore.ModelInfo, client anthropic.Client", "return err"},
	{"wg.Go(func() { converse(ctx, m) })", "ctx context.Context, chats []string, converse func(context.Context, *persistent.Manager)", "return nil"},
	{"openaiview.ChatParams(", "ctx context.Context, m *persistent.Manager, model *ctxstore.ModelInfo, client openai.Client", "return err"},
}

// TestReadmeModule: a new module set up the way README's Install section
// says (its go mod lines, the replace pointing at this checkout, then go mod
// tidy) builds every Go snippet of the README with the import lines the
// README shows and nothing else: the library, pgstore and both adapters,
// with the provider SDKs at the versions tidy picks. It needs the module
// proxy (or a module cache holding the dependencies) and skips with one line
// without.
func TestReadmeModule(t *testing.T) {
	goCmd, readme := readmeAndGo(t)
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	src, err := readmeProgram(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/agent\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := readmeModuleSteps(string(readme), root)
	if len(steps) == 0 {
		t.Fatal("README's Install section has no 'go mod' lines for a module using the library")
	}
	for _, step := range append(steps, []string{"build", "./..."}) {
		cmd := exec.Command(goCmd, step...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		if offline.Match(out) {
			t.Skipf("module proxy unavailable, README's module not built: %s", strings.SplitN(string(out), "\n", 2)[0])
		}
		t.Fatalf("go %s in a module set up as README says: %v\n%s\nagent.go:\n%s", strings.Join(step, " "), err, out, src)
	}
	// The SDKs came in at the major versions the adapters take.
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, want := range []string{"github.com/anthropics/anthropic-sdk-go/v2 ", "github.com/openai/openai-go/v3 "} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod after tidy lacks %s:\n%s", want, mod)
		}
	}
}

// readmeAndGo returns the go command and README's text for tests that
// build README's snippets, skipping them in -short runs or without go.
func readmeAndGo(t *testing.T) (goCmd string, readme []byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds README's snippets with the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err = os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return goCmd, readme
}

// offline matches the go command's complaints when no module source
// answers.
var offline = regexp.MustCompile(`dial tcp|no such host|i/o timeout|connection refused|proxyconnect|TLS handshake|network is unreachable|GOPROXY=off`)

// readmeModuleSteps returns the go commands of README's Install section that
// set up a module using the library ("go mod edit ...", "go mod tidy"), with
// the clone's path replaced by root.
func readmeModuleSteps(readme, root string) [][]string {
	at := strings.Index(readme, "## Install")
	end := strings.Index(readme[at+1:], "\n## ")
	var steps [][]string
	for _, line := range strings.Split(readme[at:at+1+end], "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "go" || f[1] != "mod" {
			continue
		}
		for i, w := range f {
			f[i] = strings.Replace(w, "=../ctxstore", "="+root, 1)
		}
		steps = append(steps, f[1:])
	}
	return steps
}

// readmeProgram is a package holding every Go snippet of readme as a
// function, with the union of the imports the snippets show.
func readmeProgram(readme string) (string, error) {
	var imports []string
	var funcs strings.Builder
	rest := readme
	for n := 0; ; n++ {
		start := strings.Index(rest, "```go\n")
		if start < 0 {
			break
		}
		rest = rest[start+len("```go\n"):]
		block := rest[:strings.Index(rest, "```")]
		rest = rest[len(block)+3:]
		imps, body := splitImports(block)
		imports = append(imports, imps...)
		i := slices.IndexFunc(readmeSnippets, func(s readmeSnippet) bool { return strings.Contains(body, s.key) })
		if i < 0 {
			return "", fmt.Errorf("README has a Go snippet this test does not know; add its parameters to readmeSnippets:\n%s", block)
		}
		fmt.Fprintf(&funcs, "\nfunc snippet%d(%s) error {\n%s\t%s\n}\n", n, readmeSnippets[i].params, body, readmeSnippets[i].trailer)
	}
	slices.Sort(imports)
	imports = slices.Compact(imports)
	// A package, not a command: building it type-checks and compiles
	// every snippet without linking a binary.
	return "package agent\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n" + funcs.String(), nil
}

// splitImports takes the import declarations (import "x", or import ( … ))
// off the start of a snippet and returns their lines and the rest.
func splitImports(block string) (imports []string, body string) {
	lines := strings.SplitAfter(block, "\n")
	i := 0
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case strings.HasPrefix(l, "import ("):
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
				if imp := strings.TrimSpace(lines[i]); imp != "" {
					imports = append(imports, imp)
				}
			}
		case strings.HasPrefix(l, "import "):
			imports = append(imports, strings.TrimPrefix(l, "import "))
		default:
			return imports, strings.Join(lines[i:], "")
		}
	}
	return imports, ""
}
