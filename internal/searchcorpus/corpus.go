// Package searchcorpus generates agent traffic to measure search on: many
// sessions of code, logs, prose, tool calls and results, some of it in
// Chinese and Japanese, with needles planted in it, each with the query a
// person (or a model) would type to find it again. It is deterministic for
// a seed.
package searchcorpus

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// Kinds of needles.
var Kinds = []string{"identifier", "snake", "qualified", "path", "error code", "number",
	"json args", "tool result", "cjk", "phrase", "prose"}

// Needle is a message planted in the corpus and a query that must find it.
type Needle struct {
	Kind    string
	Session string
	Seq     uint64 // its seq when each session is appended in order from 1
	Query   string
}

// Corpus is generated traffic.
type Corpus struct {
	Sessions   int
	PerSession int
	seed       uint64
	needles    []Needle
	planted    map[[2]int]string // (session, index) -> needle message JSON
}

// New generates a corpus of sessions × perSession messages with needles of
// every kind planted at random places: needlesPerKind of each.
func New(sessions, perSession, needlesPerKind int, seed uint64) *Corpus {
	c := &Corpus{Sessions: sessions, PerSession: perSession, seed: seed, planted: map[[2]int]string{}}
	r := rand.New(rand.NewPCG(seed, 7))
	for _, kind := range Kinds {
		for range needlesPerKind {
			var at [2]int
			for {
				at = [2]int{r.IntN(sessions), r.IntN(perSession)}
				if _, taken := c.planted[at]; !taken {
					break
				}
			}
			raw, query := needle(r, kind)
			c.planted[at] = raw
			c.needles = append(c.needles, Needle{Kind: kind, Session: SessionName(at[0]), Seq: uint64(at[1] + 1), Query: query})
		}
	}
	return c
}

// SessionName is the name of session i.
func SessionName(i int) string { return fmt.Sprintf("agent-%03d", i) }

// Needles returns the planted needles.
func (c *Corpus) Needles() []Needle { return c.needles }

// Messages returns the messages of session i, in order.
func (c *Corpus) Messages(i int) []ctxstore.Message {
	r := rand.New(rand.NewPCG(c.seed^uint64(i+1)*0x9e3779b97f4a7c15, 11))
	out := make([]ctxstore.Message, 0, c.PerSession)
	pending := ""
	for j := range c.PerSession {
		var raw string
		switch {
		case c.planted[[2]int{i, j}] != "":
			raw = c.planted[[2]int{i, j}]
		case pending != "":
			raw = toolResult(r, pending)
			pending = ""
		default:
			raw, pending = noise(r, j)
		}
		out = append(out, ctxstore.MustParseMessage([]byte(raw)))
	}
	return out
}

var (
	syllables = []string{"ka", "zu", "mor", "vex", "tal", "rin", "quo", "bel", "dra", "nix", "pol", "sey", "gri", "fam", "tov", "lum"}
	common    = strings.Fields("the a to of and in is for that it with on as this be at by from or we not are you can but have if will check run file test build error value config server request update change result return call data user should")
	idents    = strings.Fields("Handler Config Server Client Cache Store Reader Writer Buffer Index Token Session Manager Request Response Context Logger Engine Worker Queue")
	cjkChars  = []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质信")
	words     = strings.Fields("deploy rollback latency migration cursor shard replica timeout retry backoff quota tenant webhook payload schema index vacuum snapshot checksum lease heartbeat")
)

// word makes a pronounceable word not in English, unique enough for a needle.
func word(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	return b.String()
}

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func cjk(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(cjkChars[r.IntN(len(cjkChars))])
	}
	return b.String()
}

func sentence(r *rand.Rand, n int) string {
	parts := make([]string, n)
	for i := range parts {
		if r.IntN(4) == 0 {
			parts[i] = words[r.IntN(len(words))]
		} else {
			parts[i] = common[r.IntN(len(common))]
		}
	}
	return strings.Join(parts, " ")
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func text(role, s string) string { return js(map[string]any{"role": role, "content": s}) }

func call(id, name string, args any) string {
	return js(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": js(args)}}}})
}

// needle returns one needle message of kind and the query that finds it.
func needle(r *rand.Rand, kind string) (raw, query string) {
	w1, w2 := word(r, 3), word(r, 3)
	filler := sentence(r, 20)
	switch kind {
	case "identifier":
		id := "Err" + title(w1) + title(w2)
		if r.IntN(2) == 0 {
			return text("assistant", filler+" it returned "+id+" from the lock path. "+filler), w1
		}
		return text("assistant", filler+" it returned "+id+" from the lock path. "+filler), id
	case "snake":
		return text("user", "set "+w1+"_"+w2+"_limit = 40 in the config; "+filler), w1 + "_" + w2 + "_limit"
	case "qualified":
		return text("assistant", "The bug is in "+w1+"."+title(w2)+"() which "+filler), w1 + "." + title(w2)
	case "path":
		return text("assistant", "edit internal/"+w1+"/"+w2+"_cache.go near line 212; "+filler), w2 + "_cache.go"
	case "error code":
		code := fmt.Sprintf("E%s%04d", strings.ToUpper(w1[:3]), r.IntN(10000))
		return js(map[string]any{"role": "tool", "tool_call_id": "e" + w1, "content": "exit status 1: " + code + ": operation failed; " + filler}), code
	case "number":
		n := fmt.Sprintf("%d.%02d", 100000+r.IntN(900000), r.IntN(100))
		return text("user", "the invoice total came to "+n+" after tax; "+filler), n
	case "json args":
		return call("n"+w1, "open_ticket", map[string]any{"ticket": "TCK-" + w1, "priority": 2, "labels": []string{"ops", w2}}), "TCK-" + w1
	case "tool result":
		return js(map[string]any{"role": "tool", "tool_call_id": "r" + w1, "content": js(map[string]any{"status": "ok", "owner": w1 + "@example.com", "rows": 17})}), w1
	case "cjk":
		p := cjk(r, 4)
		return text("user", "请检查"+cjk(r, 6)+p+cjk(r, 6)+"。"), p
	case "phrase":
		a, b := words[r.IntN(len(words))], words[r.IntN(len(words))]
		q := common[r.IntN(len(common))]
		return text("user", filler+" "+w1+" "+a+" "+b+" "+q+" "+filler), `"` + w1 + " " + a + `"`
	default: // prose
		return text("user", filler+" remember the "+w1+" plan. "+filler), "remember " + w1
	}
}

// noise returns one ordinary message, and the id of the call it makes (a
// tool result follows) when it makes one.
func noise(r *rand.Rand, j int) (string, string) {
	switch r.IntN(8) {
	case 0:
		return text("user", sentence(r, 12+r.IntN(40))), ""
	case 1:
		return text("assistant", sentence(r, 30+r.IntN(80))), ""
	case 2:
		id := fmt.Sprintf("c%d", j)
		return call(id, "read_file", map[string]any{"path": fmt.Sprintf("internal/%s/%s.go", words[r.IntN(len(words))], common[r.IntN(len(common))])}), id
	case 3:
		id := fmt.Sprintf("c%d", j)
		return call(id, "run", map[string]any{"cmd": "go test ./... -run Test" + title(words[r.IntN(len(words))]), "timeout": 120}), id
	case 4:
		return text("assistant", "```go\nfunc ("+idents[r.IntN(len(idents))][:1]+" *"+idents[r.IntN(len(idents))]+") "+title(words[r.IntN(len(words))])+"(ctx context.Context) error {\n\treturn fmt.Errorf(\"%w: "+sentence(r, 6)+"\", Err"+idents[r.IntN(len(idents))]+")\n}\n```"), ""
	case 5:
		return text("user", "数据库"+cjk(r, 10+r.IntN(30))+"，"+sentence(r, 5)), ""
	case 6:
		var b strings.Builder
		for k := range 6 {
			fmt.Fprintf(&b, "2026-11-%02d 10:%02d:%02d INFO %s %s latency=%dms\n", 1+r.IntN(27), k, r.IntN(60), words[r.IntN(len(words))], sentence(r, 5), r.IntN(900))
		}
		return text("assistant", b.String()), ""
	default:
		return text("user", sentence(r, 8)+" "+idents[r.IntN(len(idents))]+"."+title(words[r.IntN(len(words))])), ""
	}
}

// toolResult answers call id.
func toolResult(r *rand.Rand, id string) string {
	var b strings.Builder
	for range 3 + r.IntN(8) {
		fmt.Fprintf(&b, "%s: %s\n", idents[r.IntN(len(idents))], sentence(r, 8))
	}
	return js(map[string]any{"role": "tool", "tool_call_id": id, "content": b.String()})
}

// Load appends the corpus to eng, each session in batches of up to 500
// messages.
func (c *Corpus) Load(ctx context.Context, eng storage.Engine) error {
	for i := range c.Sessions {
		ms := c.Messages(i)
		for len(ms) > 0 {
			n := min(len(ms), 500)
			recs := make([]storage.Record, n)
			for k, m := range ms[:n] {
				recs[k] = storage.Record{Message: m, Tokens: m.Size() / 4}
			}
			if _, _, err := storage.Append(ctx, eng, SessionName(i), recs...); err != nil {
				return err
			}
			ms = ms[n:]
		}
	}
	return nil
}

// Recall returns, for each kind, the fraction of needles (those keep
// accepts) whose message is among the first k hits of its query.
func Recall(ctx context.Context, needles []Needle, k int, keep func(Needle) bool, find func(ctx context.Context, query string, k int) ([]storage.Hit, error)) (map[string]float64, error) {
	found, total := map[string]int{}, map[string]int{}
	for _, n := range needles {
		if keep != nil && !keep(n) {
			continue
		}
		hits, err := find(ctx, n.Query, k)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", n.Query, err)
		}
		total[n.Kind]++
		for _, h := range hits[:min(k, len(hits))] {
			if h.Session == n.Session && h.Seq == n.Seq {
				found[n.Kind]++
				break
			}
		}
	}
	out := map[string]float64{}
	for kind, t := range total {
		out[kind] = float64(found[kind]) / float64(t)
	}
	return out, nil
}
