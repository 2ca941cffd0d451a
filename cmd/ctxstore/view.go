package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tokens"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/store"
)

func viewCommand() *command {
	return &command{
		name:    "view",
		usage:   "SESSION (--budget N | --context-window N --max-output N) [--strategy S] [--full]",
		summary: "show what would be sent to the model for a budget, and what compaction did",
		help: `Opens the session the way an agent does (the persistent manager) and asks
for the view of one request. Prints the compaction level, how many
messages were removed, truncated or stubbed, tokens before and after, the
stored messages that are not sent as they are, and the view itself, one
line per message (--full: whole texts). The budget is --budget, or
--context-window minus --max-output minus the 1000-token safety margin.

Like an agent's request, view saves its compaction decisions for that
budget with the session (derived records, never the messages), so the next
view with the same budget shares its prefix.`,
		example: "ctxstore view work --budget 8000\nctxstore view work --context-window 200000 --max-output 8192 --json",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			budget := fs.Int("budget", 0, "token budget `N` for the view")
			window := fs.Int("context-window", 0, "the model's context window `N` (with --max-output)")
			maxOut := fs.Int("max-output", 0, "the model's maximum output tokens `N` (with --context-window)")
			strategy := fs.String("strategy", "", "compaction `STRATEGY`: progressive (default) or truncate")
			full := fs.Bool("full", false, "print whole message texts, not one line each")
			pos, err := a.parse(c, fs, args, 1, 1)
			if err != nil {
				return err
			}
			switch *strategy {
			case "", view.StrategyProgressive, view.StrategyTruncate:
			case view.StrategySummarize:
				return usagef("--strategy summarize needs a model to write summaries; the command line has none (use progressive or truncate)")
			default:
				return usagef("--strategy %q: want progressive or truncate", *strategy)
			}
			var req ctxstore.Request
			switch {
			case *budget < 0 || *window < 0 || *maxOut < 0:
				return usagef("budgets must not be negative")
			case *budget > 0 && (*window > 0 || *maxOut > 0):
				return usagef("give --budget or --context-window/--max-output, not both")
			case *budget > 0:
				req.TokenBudget = *budget
			case *window > 0 && *maxOut > 0:
				req.Model = &ctxstore.ModelInfo{ContextWindow: *window, MaxOutputTokens: *maxOut}
			case *window > 0 || *maxOut > 0:
				return usagef("--context-window and --max-output go together")
			default:
				return usagef("give the budget: --budget N, or --context-window N --max-output N")
			}
			return runView(ctx, a, pos[0], req, simple.Config{Strategy: *strategy}, *full)
		},
	}
}

// event is one Hooks event, kept for the report.
type event struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data"`
}

// eventLog collects Hooks events; the demo and view print them.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

func (l *eventLog) hook(_ context.Context, name string, data map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event{Name: name, Data: data})
}

// take returns the events so far and forgets them.
func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// last returns the data of the newest event called name (nil if none).
func last(events []event, name string) map[string]any {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Name == name {
			return events[i].Data
		}
	}
	return nil
}

// quietLogger drops the manager's log lines: the events say the same, and
// the CLI prints them itself.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// viewReport is what the view command found; --json prints it as is.
type viewReport struct {
	Session string `json:"session"`
	Epoch   uint64 `json:"epoch"`
	Budget  int    `json:"budget"`
	History struct {
		Messages int `json:"messages"`
		Tokens   int `json:"tokens"`
	} `json:"history"`
	View struct {
		Messages int `json:"messages"`
		Tokens   int `json:"tokens"`
	} `json:"view"`
	Level     any         `json:"level"`
	Removed   any         `json:"removed"`
	Truncated any         `json:"truncated"`
	Stubbed   any         `json:"stubbed"`
	NotSent   [][2]uint64 `json:"not_sent_verbatim"` // seq ranges of stored messages absent from the view as they are
	Events    []event     `json:"events"`
	Messages  []viewLine  `json:"messages"`
}

// viewLine is one message of the view with where it came from.
type viewLine struct {
	Seq     uint64          `json:"seq,omitempty"` // 0: not a stored message as it is
	Kind    string          `json:"kind"`          // kept, truncated, stubbed, notice, summary, repair, changed
	Tokens  int             `json:"tokens"`
	Message json.RawMessage `json:"message"`
	msg     ctxstore.Message
}

func runView(ctx context.Context, a *app, name string, req ctxstore.Request, cfg simple.Config, full bool) error {
	// Check the file and the session first: opening a manager creates both.
	st, err := a.open(readOnly)
	if err != nil {
		return err
	}
	path := st.Path()
	_, err = session(ctx, st, name)
	st.Close()
	if err != nil {
		return err
	}
	log := &eventLog{}
	cfg.Hooks = log.hook
	mgr, err := persistent.Open(path, name, persistent.Config{Config: cfg, LockTimeout: a.lockTimeout, Logger: quietLogger()})
	if err != nil {
		return explain(path, name, err)
	}
	defer mgr.Close()
	rep, err := viewOf(ctx, mgr, log, req)
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(a.stdout, rep)
	}
	w := bufio.NewWriter(a.stdout)
	printViewReport(w, rep, full)
	return w.Flush()
}

// viewOf asks mgr for the view of req and explains it: the events log
// received, and which stored messages the view holds as they are.
func viewOf(ctx context.Context, mgr *persistent.Manager, log *eventLog, req ctxstore.Request) (viewReport, error) {
	st, name := mgr.Store(), mgr.Session()
	log.take() // only this request's events
	msgs, err := mgr.GetMessagesForRequest(ctx, req)
	if err != nil {
		return viewReport{}, explain(st.Path(), name, fmt.Errorf("view of session %q: %w", name, err))
	}
	info, err := mgr.Info(ctx)
	if err != nil {
		return viewReport{}, explain(st.Path(), name, err)
	}
	rep := viewReport{Session: name, Epoch: info.Epoch, Events: log.take()}
	rep.Budget = req.TokenBudget
	if b := last(rep.Events, ctxstore.EventBudget); b != nil {
		rep.Budget, _ = b["budget"].(int)
	}
	rep.Level = 0
	if pc := last(rep.Events, ctxstore.EventPostCompact); pc != nil {
		rep.Level, rep.Removed, rep.Truncated, rep.Stubbed = pc["level"], pc["removed"], pc["truncated"], pc["stubbed"]
	}

	// Match view messages to stored ones by their bytes, streaming the
	// history once: the view is small, the history may not be.
	est := tokens.Default()
	seed := maphash.MakeSeed()
	byHash := map[uint64][]int{}
	byResult := map[string]int{}
	for i, m := range msgs {
		h := maphash.Bytes(seed, m.Bytes())
		byHash[h] = append(byHash[h], i)
		rep.Messages = append(rep.Messages, viewLine{Kind: kindOf(m), Tokens: est.Estimate(m), Message: m.Bytes(), msg: m})
		rep.View.Tokens += rep.Messages[i].Tokens
		if ids := m.ResultIDs(); len(ids) > 0 {
			byResult[ids[0]] = i // a truncated result keeps its call id
		}
	}
	rep.View.Messages = len(msgs)
	var first, lastSeq uint64
	for e, err := range st.EpochMessages(ctx, name, info.Epoch, 0) {
		if err != nil {
			return rep, explain(st.Path(), name, err)
		}
		if first == 0 {
			first = e.Seq
		}
		lastSeq = e.Seq
		rep.History.Messages++
		rep.History.Tokens += e.Tokens
		if lines := byHash[maphash.Bytes(seed, e.Raw)]; len(lines) > 0 {
			matchBytes(rep.Messages, lines, e)
		} else if len(e.ResultIDs) > 0 {
			if i, ok := byResult[e.ResultIDs[0]]; ok && rep.Messages[i].Kind != "kept" {
				rep.Messages[i].Seq = e.Seq // shown with its seq, still not as stored
			}
		}
	}
	// Equal messages are interchangeable: give their seqs to the view's
	// copies in order.
	for _, lines := range byHash {
		var seqs []uint64
		for _, i := range lines {
			if rep.Messages[i].Kind == "kept" {
				seqs = append(seqs, rep.Messages[i].Seq)
			}
		}
		slices.Sort(seqs)
		for _, i := range lines {
			if rep.Messages[i].Kind == "kept" {
				rep.Messages[i].Seq, seqs = seqs[0], seqs[1:]
			}
		}
	}
	rep.NotSent = notSent(rep.Messages, first, lastSeq)
	return rep, nil
}

// matchBytes records that stored entry e is sent as it is, as one of the
// view's lines with its bytes. When every such line is taken already, the
// newer entry wins: compaction drops old messages first, so of two equal
// messages the view more likely holds the recent one.
func matchBytes(lines []viewLine, idx []int, e store.Entry) {
	oldest := -1
	for _, i := range idx {
		l := &lines[i]
		if string(l.Message) != string(e.Raw) {
			continue // a hash collision
		}
		if l.Kind != "kept" {
			l.Seq, l.Kind = e.Seq, "kept"
			return
		}
		if oldest < 0 || l.Seq < lines[oldest].Seq {
			oldest = i
		}
	}
	if oldest >= 0 {
		lines[oldest].Seq = e.Seq
	}
}

// notSent returns the seq ranges of [first, last] that no view line holds
// as stored. An epoch's seqs are contiguous.
func notSent(lines []viewLine, first, last uint64) [][2]uint64 {
	var kept []uint64
	for _, l := range lines {
		if l.Kind == "kept" {
			kept = append(kept, l.Seq)
		}
	}
	slices.Sort(kept)
	var out [][2]uint64
	next := first
	for _, k := range append(kept, last+1) {
		if first == 0 {
			break
		}
		if k > next {
			out = append(out, [2]uint64{next, k - 1})
		}
		next = max(next, k+1)
	}
	return out
}

// kindOf guesses what compaction made of a view message that is not a
// stored message as it is, from the markers compaction writes.
func kindOf(m ctxstore.Message) string {
	text := m.Text()
	switch {
	case m.Source() == "context-compaction":
		return "notice"
	case strings.HasPrefix(text, "[truncated:"):
		return "truncated"
	case strings.HasPrefix(text, "[User message compacted"):
		return "stubbed"
	case strings.HasPrefix(text, "Previous conversation summary"):
		return "summary"
	case strings.HasPrefix(text, "[interrupted:"):
		return "repair"
	}
	return "changed"
}

func printViewReport(w io.Writer, rep viewReport, full bool) {
	fmt.Fprintf(w, "session %q, epoch %d: full history %d messages, ~%d tokens\n", rep.Session, rep.Epoch, rep.History.Messages, rep.History.Tokens)
	fmt.Fprintf(w, "budget %d tokens: view %d messages, ~%d tokens", rep.Budget, rep.View.Messages, rep.View.Tokens)
	if rep.Removed == nil {
		fmt.Fprintf(w, " (fits: nothing compacted)\n")
	} else {
		fmt.Fprintf(w, "\ncompaction level %v (%s): removed %v, truncated %v, stubbed %v\n",
			rep.Level, levelName(rep.Level), rep.Removed, rep.Truncated, rep.Stubbed)
	}
	if c := last(rep.Events, ctxstore.EventCompaction); c != nil {
		fmt.Fprintf(w, "this request escalated: tokens %v -> %v, messages %v -> %v (target %v)\n",
			c["tokens_before"], c["tokens_after"], c["messages_before"], c["messages_after"], c["target"])
	}
	for _, ev := range rep.Events {
		if ev.Name == ctxstore.EventWarning {
			fmt.Fprintf(w, "warning: %v\n", ev.Data["message"])
		}
	}
	if len(rep.NotSent) > 0 {
		var parts []string
		n := uint64(0)
		for _, r := range rep.NotSent {
			n += r[1] - r[0] + 1
			if len(parts) < 12 {
				if r[0] == r[1] {
					parts = append(parts, fmt.Sprintf("#%d", r[0]))
				} else {
					parts = append(parts, fmt.Sprintf("#%d-#%d", r[0], r[1]))
				}
			}
		}
		more := ""
		if len(rep.NotSent) > len(parts) {
			more = ", ..."
		}
		fmt.Fprintf(w, "not sent as stored (removed, truncated or stubbed): %d messages: %s%s\n", n, strings.Join(parts, ", "), more)
	}
	fmt.Fprintln(w)
	for _, l := range rep.Messages {
		seq := "-"
		if l.Seq > 0 {
			seq = fmt.Sprintf("#%d", l.Seq)
		}
		if full {
			fmt.Fprintf(w, "%-7s %-9s %-9s %6d tok\n%s\n", seq, l.Kind, l.msg.Role(), l.Tokens, indent(l.msg.Text(), "    "))
			continue
		}
		fmt.Fprintf(w, "%-7s %-9s %-9s %6d tok  %s\n", seq, l.Kind, l.msg.Role(), l.Tokens, oneLine(l.msg, 90))
	}
}

func levelName(level any) string {
	switch fmt.Sprint(level) {
	case fmt.Sprint(view.LevelNone):
		return "none"
	case fmt.Sprint(view.LevelTruncate):
		return "old tool results truncated"
	case fmt.Sprint(view.LevelRemove):
		return "old messages removed"
	case fmt.Sprint(view.LevelStub):
		return "long user messages stubbed"
	case fmt.Sprint(view.LevelLastResort):
		return "protected messages cut to fit, last resort"
	}
	return "?"
}
