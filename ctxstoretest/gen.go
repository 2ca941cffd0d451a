package ctxstoretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ctxstore/ctxstore"
)

// genOpts shapes a generated conversation.
type genOpts struct {
	turns       int     // user turns
	toolRate    float64 // chance of each extra tool round within a turn (up to 3)
	anthropic   float64 // share of tool groups written as Anthropic content blocks
	midSystem   bool    // add a system message in the middle of the conversation
	pendingTail bool    // end with an assistant whose tool calls are (partly) unanswered
	orphan      bool    // add a tool result whose call is not in the history
	reuseIDs    bool    // number calls call_0, call_1… in every group, as some models do
	wild        float64 // chance per turn of an irregular message sequence (see wild)
}

// gen writes realistic agent conversations: system prompts, questions, long
// pasted logs, OpenAI tool_calls groups (parallel calls answered in any
// order), Anthropic tool_use/tool_result blocks, large tool outputs, and the
// JSON details a lossless store must keep (big integers, 1.0, 1e400,
// unicode, escapes, unknown keys in any order, null content). Every message
// carries a unique step number, so no two messages are byte-identical and a
// view can be matched back to the history.
type gen struct {
	r     *rand.Rand
	step  int
	reuse bool // genOpts.reuseIDs of the conversation being written
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, 0x6374787374))}
}

// conversation generates one conversation with the given options.
func (g *gen) conversation(o genOpts) []ctxstore.Message {
	g.reuse = o.reuseIDs
	var ms []ctxstore.Message
	ms = append(ms, g.system("You are a careful coding agent working in a Go repository. Prefer small, tested changes."))
	if g.r.IntN(2) == 0 {
		ms = append(ms, g.system("Tools available: read_file, bash, grep. Answer in English; the user writes in several languages (é, 世界, Привет)."))
	}
	for turn := 0; turn < o.turns; turn++ {
		ms = append(ms, g.user())
		for round := 0; round < 3 && g.r.Float64() < o.toolRate; round++ {
			ms = append(ms, g.toolGroup(g.r.Float64() < o.anthropic, true)...)
		}
		ms = append(ms, g.assistant())
		if o.midSystem && turn == o.turns/2 {
			ms = append(ms, g.system("Note from the operator: the repository moved to /srv/app; paths before this point are stale."))
		}
		if g.r.Float64() < o.wild {
			ms = append(ms, g.wild()...)
		}
		if o.orphan && turn == o.turns/3 {
			ms = append(ms, g.raw(`{"role":"tool","tool_call_id":"call_lost_%d","content":"result of a call that is not in this transcript (step %d)"}`))
		}
	}
	ms = append(ms, g.user())
	if o.pendingTail {
		ms = append(ms, g.toolGroup(g.r.Float64() < o.anthropic, false)...)
	} else if g.r.IntN(2) == 0 {
		// The usual state just before a request: the results are in, the
		// model has not answered yet.
		ms = append(ms, g.toolGroup(g.r.Float64() < o.anthropic, true)...)
	}
	return ms
}

func (g *gen) next() int { g.step++; return g.step }

// obj writes a JSON object from key/raw-value pairs, formatted one of the
// ways real hosts write JSON (compact, spaced, or pretty).
func (g *gen) obj(kv ...string) []byte {
	var b bytes.Buffer
	style := g.r.IntN(6)
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
			if style == 1 {
				b.WriteByte(' ')
			}
		}
		if style == 2 {
			b.WriteString("\n  ")
		}
		b.WriteString(str(kv[i]))
		b.WriteByte(':')
		if style != 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[i+1])
	}
	if style == 2 {
		b.WriteByte('\n')
	}
	b.WriteByte('}')
	return b.Bytes()
}

// str encodes s as a JSON string without HTML escaping, as most hosts do.
func str(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (g *gen) parse(b []byte) ctxstore.Message {
	m, err := ctxstore.ParseMessage(b)
	if err != nil {
		// The generator only writes valid messages; a failure here is a bug
		// in this file, not in the manager under test.
		panic(fmt.Sprintf("ctxstoretest: generated an invalid message: %v\n%s", err, b))
	}
	return m
}

// raw fills a format with the next step number (twice) and parses it.
func (g *gen) raw(format string) ctxstore.Message {
	n := g.next()
	return g.parse(fmt.Appendf(nil, format, n, n))
}

// extras returns optional keys hosts add: metadata with numbers that lose
// precision through float64, and unknown keys.
func (g *gen) extras(n int) []string {
	var kv []string
	switch g.r.IntN(5) {
	case 0:
		kv = append(kv, "metadata", fmt.Sprintf(`{"turn_id":9007199254740993,"ratio":1.0,"limit":1e400,"step":%d,"tags":["a","b"],"source":"cli"}`, n))
	case 1:
		kv = append(kv, "x_trace", `{"z":1,"a":[1.50,-0.0,2E+3],"nested":{"k":null,"t":true}}`)
	case 2:
		kv = append(kv, "name", str(fmt.Sprintf("agent-%d", n%7)))
	}
	return kv
}

func (g *gen) system(text string) ctxstore.Message {
	n := g.next()
	return g.parse(g.obj("role", `"system"`, "content", str(fmt.Sprintf("%s (rev %d)", text, n))))
}

var questions = []string{
	"Why does TestParse fail on the CI machine but not locally?",
	"Please add a --json flag to the list command.",
	"Can you explain what internal/view does, in two sentences?",
	"Rename Config.Limit to Config.MaxItems everywhere, and keep the old name as a deprecated alias.",
	"Le build échoue avec « undefined: slices.Concat » — quelle version de Go faut-il ?",
	"ビルドが失敗します。go.mod を確認してください。",
	"Run the benchmarks and tell me if the <cache> & \"pool\" change helped.",
	"Tab\tseparated\tinput and a backslash \\ and a line\u2028separator.",
}

func (g *gen) user() ctxstore.Message {
	n := g.next()
	text := fmt.Sprintf("Step %d: %s", n, questions[g.r.IntN(len(questions))])
	if g.r.IntN(4) == 0 {
		// A pasted log: the kind of long user message compaction stubs.
		var b strings.Builder
		b.WriteString(text + "\nHere is the output:\n")
		for i := range 10 + g.r.IntN(40) {
			fmt.Fprintf(&b, "2026-11-22T05:%02d:%02d.%03dZ ERROR worker %d: dial tcp 10.0.%d.%d:5432: connection refused\n",
				i%60, g.r.IntN(60), g.r.IntN(1000), g.r.IntN(16), g.r.IntN(256), g.r.IntN(256))
		}
		text = b.String()
	}
	kv := []string{"role", `"user"`, "content", str(text)}
	if g.r.IntN(3) == 0 { // content blocks instead of a string
		kv[3] = fmt.Sprintf(`[{"type":"text","text":%s}]`, str(text))
	}
	kv = append(kv, g.extras(n)...)
	if g.r.IntN(8) == 0 { // content before role
		kv[0], kv[1], kv[2], kv[3] = kv[2], kv[3], kv[0], kv[1]
	}
	return g.parse(g.obj(kv...))
}

var replies = []string{
	"Done. The failing test depended on the local time zone; it now uses time.UTC.",
	"I added the flag and a table test for it. Nothing else changed.",
	"internal/view computes the compacted view as pure functions. It does no I/O, so it is easy to test.",
	"The benchmark improved from 41.2 ns/op to 17.9 ns/op (−57 %).",
	"Voilà : il faut Go 1.22 ou plus récent. 🚀",
}

func (g *gen) assistant() ctxstore.Message {
	n := g.next()
	kv := []string{"role", `"assistant"`, "content", str(fmt.Sprintf("Step %d: %s", n, replies[g.r.IntN(len(replies))]))}
	kv = append(kv, g.extras(n)...)
	return g.parse(g.obj(kv...))
}

var tools = []struct{ name, args string }{
	{"read_file", `{"path":"internal/view/view.go","offset":0,"limit":400}`},
	{"bash", `{"command":"go test ./... 2>&1 | tail -n 50","timeout":120.0}`},
	{"grep", `{"pattern":"func (m \\*Manager)","path":".","max":1e3}`},
}

// toolOutput is a tool result body, large enough that truncation matters.
func (g *gen) toolOutput(n int, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d, %s output:\n", n, name)
	lines := 5 + g.r.IntN(120)
	for i := range lines {
		switch name {
		case "read_file":
			fmt.Fprintf(&b, "%4d\tfunc helper%d(x int) int { return x * %d } // <>&\n", i+1, i, g.r.IntN(100))
		case "bash":
			fmt.Fprintf(&b, "ok  \tgithub.com/ctxstore/ctxstore/pkg%d\t%d.%03ds\n", i, g.r.IntN(9), g.r.IntN(1000))
		default:
			fmt.Fprintf(&b, "store/log.go:%d:func (m *Manager) Method%d(ctx context.Context) error {\n", 10*i+1, i)
		}
	}
	return b.String()
}

// toolGroup writes an assistant message with 1–3 calls and, when complete,
// all their results; parallel results come back in any order. When not
// complete, some results (possibly none) are missing: the group is pending.
func (g *gen) toolGroup(anthropic, complete bool) []ctxstore.Message {
	n := g.next()
	calls := 1 + g.r.IntN(3)
	type call struct{ id, name, args string }
	cs := make([]call, calls)
	for i := range cs {
		t := tools[g.r.IntN(len(tools))]
		prefix := "call_"
		if anthropic {
			prefix = "toolu_"
		}
		cs[i] = call{fmt.Sprintf("%s%d_%d", prefix, n, i), t.name, t.args}
		if g.reuse {
			cs[i].id = fmt.Sprintf("%s%d", prefix, i)
		}
	}
	answered := calls
	if !complete {
		answered = g.r.IntN(calls)
	}
	order := g.r.Perm(calls)[:answered]
	var out []ctxstore.Message
	if anthropic {
		var blocks []string
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":"Step %d: let me check."}`, n))
		for _, c := range cs {
			blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%s,"name":%s,"input":%s}`, str(c.id), str(c.name), c.args))
		}
		out = append(out, g.parse(g.obj("role", `"assistant"`, "content", "["+strings.Join(blocks, ",")+"]")))
		if answered > 0 {
			rn := g.next()
			var results []string
			for _, i := range order {
				results = append(results, fmt.Sprintf(`{"type":"tool_result","tool_use_id":%s,"content":%s}`,
					str(cs[i].id), str(g.toolOutput(rn, cs[i].name))))
			}
			out = append(out, g.parse(g.obj("role", `"user"`, "content", "["+strings.Join(results, ",")+"]")))
		}
		return out
	}
	var tcs []string
	for _, c := range cs {
		tcs = append(tcs, fmt.Sprintf(`{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, str(c.id), str(c.name), str(c.args)))
	}
	content := "null"
	if g.r.IntN(3) == 0 || g.reuse { // reused ids alone would repeat the bytes
		content = str(fmt.Sprintf("Step %d: running tools.", n))
	}
	out = append(out, g.parse(g.obj("role", `"assistant"`, "content", content, "tool_calls", "["+strings.Join(tcs, ",")+"]")))
	for _, i := range order {
		rn := g.next()
		kv := []string{"role", `"tool"`, "tool_call_id", str(cs[i].id), "content", str(g.toolOutput(rn, cs[i].name))}
		if g.r.IntN(2) == 0 {
			kv = append(kv, "name", str(cs[i].name))
		}
		out = append(out, g.parse(g.obj(kv...)))
	}
	return out
}

// wild returns one of the irregular sequences real transcripts hold: an
// interrupted tool turn, a result whose call was filtered out, results
// split over two messages, repeated texts, developer and legacy function
// messages, empty or absent content, a huge paste, or two assistant
// messages in a row.
func (g *gen) wild() []ctxstore.Message {
	n := g.next()
	switch g.r.IntN(10) {
	case 0: // interrupted: calls without results, then the user moves on
		grp := g.toolGroup(g.r.IntN(2) == 0, false)
		return append(grp[:1], g.user())
	case 1:
		return []ctxstore.Message{g.raw(`{"role":"tool","tool_call_id":"call_gone_%d","content":"orphan %d"}`)}
	case 2: // Anthropic results split over two user messages
		a := g.parse(fmt.Appendf(nil, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_s%d_a","name":"ls","input":{}},{"type":"tool_use","id":"toolu_s%d_b","name":"pwd","input":{}}]}`, n, n))
		r1 := g.parse(fmt.Appendf(nil, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s%d_b","content":"/src"}]}`, n))
		r2 := g.parse(fmt.Appendf(nil, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s%d_a","content":"a.go"}]}`, n))
		return []ctxstore.Message{a, r1, r2}
	case 3: // the same words again (only the metadata differs)
		return []ctxstore.Message{g.raw(`{"role":"user","content":"continue","metadata":{"n":%d,"m":%d}}`)}
	case 4:
		return []ctxstore.Message{g.raw(`{"role":"developer","content":"Developer note %d: prefer table tests (%d)."}`)}
	case 5:
		return []ctxstore.Message{g.raw(`{"role":"function","name":"legacy_%d","content":"legacy result %d"}`)}
	case 6:
		return []ctxstore.Message{g.raw(`{"role":"assistant","content":"","x":[%d,%d]}`), g.raw(`{"role":"assistant","y":"%d %d"}`)}
	case 7: // a huge paste, larger than small budgets on its own
		return []ctxstore.Message{g.parse(g.obj("role", `"user"`, "content", str(fmt.Sprintf("Step %d: %s", n, strings.Repeat("0123456789abcdef", 1000)))))}
	case 8:
		return []ctxstore.Message{g.assistant(), g.assistant()}
	default: // a tool result carrying both a tool_call_id and blocks, with text before
		id := fmt.Sprintf("call_w%d", n)
		a := g.parse(fmt.Appendf(nil, `{"role":"assistant","content":"checking","tool_calls":[{"id":%q,"type":"function","function":{"name":"f","arguments":"{}"}}]}`, id))
		r := g.parse(fmt.Appendf(nil, `{"role":"tool","tool_call_id":%q,"content":[{"type":"text","text":"done %d"}]}`, id, n))
		return []ctxstore.Message{a, r}
	}
}

// tricky returns messages whose bytes a lossy store would change.
func tricky() []ctxstore.Message {
	lits := []string{
		`{"role":"user","content":"big int","metadata":{"id":9007199254740993}}`,
		`{"role":"user","content":"floats","metadata":{"a":1.0,"b":1e400,"c":-0.0,"d":1E-7,"e":0.10000000000000001}}`,
		`{"role":"user","content":"unicode é 世界 🚀 \u00e9 \ud83d\ude80 \u2028 \"quoted\" \\ \/ \b\f\n\r\t <b>&amp;</b>"}`,
		`{"z":1,"content":"unknown keys, odd order","role":"user","a":{"y":[3,2,1],"x":null},"M":true}`,
		"{\n  \"role\" : \"assistant\" ,\n  \"content\" : \"pretty printed\"\n}",
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_t1","type":"function","function":{"name":"f","arguments":"{\"n\":9007199254740993}"}}]}`,
		`{"role":"tool","tool_call_id":"call_t1","content":"{\"ok\":true}"}`,
		`{"role":"assistant","content":[{"type":"text","text":"blocks"},{"type":"tool_use","id":"toolu_t2","name":"g","input":{"n":1.0,"big":9007199254740993}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_t2","content":[{"type":"text","text":"r"}],"is_error":false}]}`,
		`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"what is this?"}]}`,
		`{"role":"developer","content":"dev note","Role":"ignored: keys are case-sensitive"}`,
		`{"role":"user","content":"a stray tool_call_id does not make a user message a tool result","tool_call_id":"stray_1"}`,
		`{"role":"assistant"}`,
		`{"role":"assistant","content":"","tool_calls":null}`,
		`{"role":"function","name":"legacy","content":"old-style function result"}`,
	}
	ms := make([]ctxstore.Message, len(lits))
	for i, l := range lits {
		ms[i] = ctxstore.MustParseMessage([]byte(l))
	}
	return ms
}
