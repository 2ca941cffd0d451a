package view_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ctxstore/ctxstore"
)

// This file generates the agent conversations the view-quality test
// measures: an ops agent, a coding agent and a research agent. Each turn
// is a user request, one or more tool groups whose raw output holds the
// evidence, and the assistant's conclusion; the facts worth keeping are
// stated in user and assistant text and are unique strings, so a view
// keeps a fact when some message of it contains that string.

// factConv is a generated conversation and the facts it states.
type factConv struct {
	msgs  []ctxstore.Message
	facts []string
}

// agentKinds are the kinds of conversation the quality test measures.
var agentKinds = []struct {
	name string
	gen  func(r *rand.Rand, turns int) factConv
}{
	{"ops", opsConversation},
	{"coding", codingConversation},
	{"research", researchConversation},
}

type convBuilder struct {
	r     *rand.Rand
	calls int
	factConv
}

func (b *convBuilder) add(v any) {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	b.msgs = append(b.msgs, ctxstore.MustParseMessage(js))
}

func (b *convBuilder) say(role, text string) { b.add(map[string]any{"role": role, "content": text}) }

func (b *convBuilder) fact(f string) string {
	b.facts = append(b.facts, f)
	return f
}

func (b *convBuilder) pick(words ...string) string { return words[b.r.IntN(len(words))] }

// words returns n words of filler prose.
func (b *convBuilder) words(n int) string {
	vocab := []string{"the", "service", "request", "value", "config", "latency", "because", "after", "check",
		"which", "deploy", "cache", "queue", "error", "retry", "worker", "and", "then", "of", "a", "is", "for"}
	out := make([]string, n)
	for i := range out {
		out[i] = vocab[b.r.IntN(len(vocab))]
	}
	return strings.Join(out, " ")
}

// openAICalls adds an assistant message calling each of args (OpenAI
// tool_calls, with text when text is not empty) and their results.
func (b *convBuilder) openAICalls(text, name string, args []map[string]any, output func(i int) string) {
	var calls []map[string]any
	var ids []string
	for _, a := range args {
		b.calls++
		id := fmt.Sprintf("call_%d", b.calls)
		aj, _ := json.Marshal(a)
		calls = append(calls, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": string(aj)}})
		ids = append(ids, id)
	}
	msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	if text != "" {
		msg["content"] = text
	}
	b.add(msg)
	for i, id := range ids {
		b.add(map[string]any{"role": "tool", "tool_call_id": id, "content": output(i)})
	}
}

// anthropicCalls is openAICalls with tool_use and tool_result blocks.
func (b *convBuilder) anthropicCalls(text, name string, inputs []map[string]any, output func(i int) string) {
	var blocks, results []map[string]any
	if text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": text})
	}
	for i, in := range inputs {
		b.calls++
		id := fmt.Sprintf("toolu_%d", b.calls)
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": name, "input": in})
		results = append(results, map[string]any{"type": "tool_result", "tool_use_id": id, "content": output(i)})
	}
	b.add(map[string]any{"role": "assistant", "content": blocks})
	b.add(map[string]any{"role": "user", "content": results})
}

// opsConversation: a user asks about one host per turn, the assistant
// runs df and du there (about a thousand tokens of output, the telling
// line somewhere in the middle) and sometimes the journal, and states the
// finding in a line. Some requests carry a ticket number.
func opsConversation(r *rand.Rand, turns int) factConv {
	b := &convBuilder{r: r}
	b.say("system", "You are an operations assistant with shell access to the fleet through run_command. Be brief.")
	for t := range turns {
		host := fmt.Sprintf("%s-%02d", b.pick("db", "web", "cache", "queue", "batch"), t+1)
		q := fmt.Sprintf("%s is alerting on disk again, can you check what is filling it?", host)
		if r.IntN(3) == 0 {
			q += " Its maintenance window is ticket " + b.fact(fmt.Sprintf("OPS-%d", 4000+t*37)) + "."
		}
		b.say("user", q)
		pct, dir := 80+r.IntN(20), b.pick("/var/log/journal", "/var/lib/docker", "/srv/backups", "/tmp/spool")
		b.openAICalls("", "run_command", []map[string]any{{"host": host, "cmd": "df -h; du -xsh /var/* /srv/* | sort -h"}},
			func(int) string { return b.dfOutput(pct, dir) })
		if r.IntN(3) == 0 {
			b.openAICalls("", "run_command", []map[string]any{{"host": host, "cmd": "journalctl -p warning --since today"}},
				func(int) string { return b.journal(60 + r.IntN(40)) })
		}
		b.say("assistant", fmt.Sprintf("%s: / at %d%%, %dG in %s; %s.", b.fact(host+" disk "+fmt.Sprint(pct)+"%"),
			pct, 10+r.IntN(90), dir, b.pick("safe to clean up", "needs a bigger volume", "rotate and compress")))
	}
	return b.factConv
}

func (b *convBuilder) dfOutput(pct int, dir string) string {
	var s strings.Builder
	s.WriteString("Filesystem      Size  Used Avail Use% Mounted on\n")
	mounts := []string{"/boot", "/home", "/opt", "/srv", "/data", "/mnt/scratch", "/var/tmp", "/run", "/dev/shm"}
	for i := range 22 {
		if i == 11 {
			fmt.Fprintf(&s, "/dev/nvme0n1p2  200G  %dG  %dG  %d%% /\n", 2*pct, 200-2*pct, pct)
			continue
		}
		fmt.Fprintf(&s, "/dev/sd%c%d  %dG  %dG  %dG  %d%% %s\n", 'a'+rune(i%5), i, 50+b.r.IntN(400), b.r.IntN(50), b.r.IntN(300), b.r.IntN(70), mounts[i%len(mounts)])
	}
	for i := range 40 {
		d := dir
		if i != 30 {
			d = fmt.Sprintf("/var/%s/%s%d", b.pick("cache", "lib", "spool", "opt"), b.pick("app", "pkg", "tmp", "data"), i)
		}
		fmt.Fprintf(&s, "%d.%dM\t%s\n", b.r.IntN(900), b.r.IntN(10), d)
	}
	return s.String()
}

func (b *convBuilder) journal(lines int) string {
	var s strings.Builder
	for i := range lines {
		fmt.Fprintf(&s, "Nov 27 0%d:%02d:%02d host %s[%d]: %s\n", i%10, b.r.IntN(60), b.r.IntN(60),
			b.pick("kernel", "systemd", "dockerd", "postgres"), 100+b.r.IntN(9000), b.words(8+b.r.IntN(6)))
	}
	return s.String()
}

// codingConversation: each turn asks for a fix in one file (sometimes
// with a constraint), the assistant reads the file, runs the tests,
// edits (the patch in the call's arguments) and states what it changed
// and where.
func codingConversation(r *rand.Rand, turns int) factConv {
	b := &convBuilder{r: r}
	b.say("system", "You are a coding agent working in a Go repository. Use read_file, run_tests and edit_file.")
	for t := range turns {
		file := fmt.Sprintf("internal/%s/%s%d.go", b.pick("wire", "store", "api", "auth", "sched"), b.pick("header", "codec", "queue", "token", "limit"), t)
		fn := fmt.Sprintf("%s%s%d", b.pick("read", "parse", "encode", "check", "flush"), b.pick("Header", "Frame", "Batch", "Lease"), t)
		q := fmt.Sprintf("Test%s fails since yesterday's merge; please fix %s in %s.", fn[:1]+fn[1:], fn, file)
		if r.IntN(3) == 0 {
			q += " Constraint: " + b.fact(fmt.Sprintf("keep the exported API of %s unchanged (CODE-%d)", file, 700+t)) + "."
		}
		b.say("user", q)
		text := ""
		if r.IntN(2) == 0 {
			text = "Reading the file and the failing test first."
		}
		b.openAICalls(text, "read_file", []map[string]any{{"path": file}, {"path": strings.Replace(file, ".go", "_test.go", 1)}},
			func(i int) string { return b.code(fn, 60+r.IntN(90)/(i+1)) })
		b.openAICalls("", "run_tests", []map[string]any{{"run": "Test" + fn}},
			func(int) string { return b.testLog(fn, 30+r.IntN(40)) })
		line := 40 + r.IntN(400)
		b.openAICalls("", "edit_file", []map[string]any{{"path": file, "patch": b.code(fn, 8+r.IntN(20))}},
			func(int) string { return "ok: 1 hunk applied" })
		b.say("assistant", fmt.Sprintf("Fixed: %s %s (%s). Test%s passes now; %s",
			fn, b.pick("read one byte past the frame", "ignored a zero length", "kept a stale lease", "dropped the last batch"),
			b.fact(fmt.Sprintf("%s:%d", file, line)), fn, b.words(10+r.IntN(30))))
	}
	return b.factConv
}

func (b *convBuilder) code(fn string, lines int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "package p\n\nfunc %s(buf []byte, n int) (int, error) {\n", fn)
	for i := range lines {
		fmt.Fprintf(&s, "\tif %s := %s(buf[%d:], n+%d); %s != nil { return %d, fmt.Errorf(\"%s: %%w\", err) }\n",
			b.pick("err", "e", "x"), b.pick("decode", "next", "peek", "take"), i, b.r.IntN(64), b.pick("err", "e", "x"), i, b.words(3))
	}
	s.WriteString("\treturn n, nil\n}\n")
	return s.String()
}

func (b *convBuilder) testLog(fn string, lines int) string {
	var s strings.Builder
	for i := range lines {
		fmt.Fprintf(&s, "=== RUN   Test%s/case_%d\n    %s_test.go:%d: %s\n", fn, i, strings.ToLower(fn), 10+i, b.words(6))
	}
	fmt.Fprintf(&s, "--- FAIL: Test%s (0.%02ds)\nFAIL\n", fn, b.r.IntN(99))
	return s.String()
}

// researchConversation (Anthropic blocks): each turn asks a question, the
// assistant runs two searches in parallel and fetches a page, then answers
// with two figures and their source in a few sentences.
func researchConversation(r *rand.Rand, turns int) factConv {
	b := &convBuilder{r: r}
	b.say("system", "You are a research assistant. Search, read sources, and answer with figures and citations.")
	for t := range turns {
		place := fmt.Sprintf("%s %s", b.pick("Kessler", "Avery", "Morrow", "Tallis", "Okafor", "Lindqvist"), b.pick("Basin", "Shelf", "Ridge", "Delta", "Plateau"))
		b.say("user", fmt.Sprintf("How large is the %s (site %d), and how fast is it changing?", place, t))
		b.anthropicCalls("Searching for survey data.", "web_search",
			[]map[string]any{{"query": place + " area survey"}, {"query": place + " change per year"}},
			func(int) string { return b.snippets(8 + r.IntN(6)) })
		b.anthropicCalls("", "fetch_page", []map[string]any{{"url": fmt.Sprintf("https://example.org/surveys/%d", t)}},
			func(int) string { return b.words(700 + r.IntN(900)) })
		area := b.fact(fmt.Sprintf("%d,%03d km2", 10+r.IntN(90), r.IntN(1000)))
		rate := b.fact(fmt.Sprintf("%d.%d mm per year (site %d)", 1+r.IntN(9), r.IntN(10), t))
		b.say("assistant", fmt.Sprintf("The %s covers about %s according to the %d survey, and its rim moves %s. %s",
			place, area, 2000+r.IntN(25), rate, b.words(40+r.IntN(80))))
	}
	return b.factConv
}

func (b *convBuilder) snippets(n int) string {
	var s strings.Builder
	for i := range n {
		fmt.Fprintf(&s, "%d. https://example.org/%s/%d\n   %s\n", i+1, b.pick("news", "papers", "wiki", "data"), b.r.IntN(100000), b.words(25+b.r.IntN(20)))
	}
	return s.String()
}
