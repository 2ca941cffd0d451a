package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/viewreport"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		usage:   "[--db FILE|URL] [--budget N]",
		summary: "walk through a long-running assistant session across restarts (start here)",
		help: `Plays a personal assistant's session in a few seconds: the agent starts
with a memory file, talks and calls tools, the process exits and comes
back (twice), the host offers a filtered transcript that is ignored, a
tool call is interrupted by a crash and repaired; along the way it shows
the full history beside the compacted view for a small budget, the Hooks
events, append and view timings and the file size.

Without --db it works in a temporary directory, removed at the end; with
--db FILE the session stays there to explore with ls, show and view. With
--db postgres://HOST/DATABASE it runs on PostgreSQL, each run with a
connection pool of its own, as a restarted process would.`,
		example: "ctxstore demo\nctxstore demo --db /tmp/demo.db && ctxstore --db /tmp/demo.db view assistant --budget 10000",
		run: func(ctx context.Context, a *app, c *command, args []string) error {
			fs := a.flags(c)
			budget := fs.Int("budget", 10000, "token budget `N` of the compacted view shown")
			if _, err := a.parse(c, fs, args, 0, 0); err != nil {
				return err
			}
			if *budget <= 0 {
				return usagef("--budget must be positive")
			}
			return runDemo(ctx, a, *budget)
		},
	}
}

// demo is one run of the walk-through.
type demo struct {
	a       *app
	w       io.Writer
	path    string           // the file, or a PostgreSQL URL
	server  bool             // path is a PostgreSQL URL
	engines []storage.Engine // opened by this step's runs (PostgreSQL)
	session string
	mem     string // memory file
	log     *viewreport.EventLog
	appends []time.Duration
	budget  int
	turn    int
}

func runDemo(ctx context.Context, a *app, budget int) error {
	tmp, err := os.MkdirTemp("", "ctxstore-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	// A reader that goes away (demo | head -1) makes writes fail with
	// EPIPE instead of killing the process, so the directory above is
	// removed; the demo then stops.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	// On a terminal every line fits its width: prose wraps, the view's
	// one-line message rows are cut. Piped output keeps its lines whole.
	cols := 0
	if a.stdoutIsTerminal() {
		cols = width(a.stdout)
	}
	out := &fitWriter{w: a.stdout, width: cols, cut: func(l string) bool { return strings.HasPrefix(l, "#") }}
	defer out.Flush()
	d := &demo{a: a, w: out, log: &viewreport.EventLog{}, budget: budget, mem: filepath.Join(tmp, "USER.md")}
	kept := a.db != ""
	if kept {
		d.path = a.db
	} else {
		d.path = filepath.Join(tmp, "demo.db")
	}
	if err := os.WriteFile(d.mem, []byte("The user is Ana. She runs a home server called 'pantry' (Debian) and prefers short answers.\n"), 0o600); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if d.session, d.server, err = d.freeSession(ctx, "assistant"); err != nil {
		return err
	}
	start := time.Now()
	if d.server {
		fmt.Fprintf(d.w, "ctxstore demo: an assistant's conversation kept in PostgreSQL, across restarts\n")
	} else {
		fmt.Fprintf(d.w, "ctxstore demo: an assistant's conversation kept in one bbolt file, across restarts\n")
	}
	if kept {
		fmt.Fprintf(d.w, "database: %s, session %q\n", redactURL(d.path), d.session)
	} else {
		fmt.Fprintf(d.w, "database: %s (temporary; 'ctxstore demo --db FILE' keeps it to explore)\n", d.path)
	}
	for _, step := range []func(context.Context) error{d.firstRun, d.restart, d.crash, d.summary} {
		err := step(ctx)
		d.closeEngines()
		if err != nil {
			return err
		}
		if out.err != nil {
			return fmt.Errorf("demo: %w", out.err) // the reader went away
		}
	}
	fmt.Fprintf(d.w, "\ndemo done in %v\n", time.Since(start).Round(10*time.Millisecond))
	if kept {
		q := shellQuote(redactURL(d.path))
		fmt.Fprintf(d.w, "explore: ctxstore --db %s ls; ctxstore --db %s show %s; ctxstore --db %s view %s --budget %d\n",
			q, q, d.session, q, d.session, d.budget)
	}
	return out.Flush()
}

// freeSession returns base, or base-2, base-3, ... when a session of that
// name exists already (demo --db run twice on one database), and whether
// the database is a server's (its engine keeps no file of its own).
func (d *demo) freeSession(ctx context.Context, base string) (string, bool, error) {
	st, err := d.a.openAt(ctx, d.path, readWrite)
	if err != nil {
		return "", false, err
	}
	defer st.Close()
	_, file := st.(storage.FileEngine)
	name, err := freeName(ctx, st, base)
	return name, !file, err
}

// freeName is the first of base, base-2, base-3, ... that names no session
// in st.
func freeName(ctx context.Context, st storage.Engine, base string) (string, error) {
	name := base
	for i := 2; ; i++ {
		_, err := st.Session(ctx, name)
		if errors.Is(err, storage.ErrNotFound) {
			return name, nil
		}
		if err != nil {
			return "", explainIn(st, name, err)
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

func (d *demo) open(ctx context.Context) (*persistent.Manager, error) {
	cfg := persistent.Config{
		Config:      simple.Config{Hooks: d.log.Hook},
		MemoryFiles: []string{d.mem},
		LockTimeout: d.a.lockTimeout,
	}
	if d.server {
		// A pool of its own, as a restarted process would have; closed
		// when the step ends, after its managers.
		eng, err := d.a.openAt(ctx, d.path, readWrite)
		if err != nil {
			return nil, err
		}
		d.engines = append(d.engines, eng)
		cfg.LockTimeout = 0 // it configures a file
		m, err := persistent.OpenEngine(eng, d.session, cfg)
		if err != nil {
			return nil, explainIn(eng, d.session, err)
		}
		return m, nil
	}
	m, err := persistent.Open(d.path, d.session, cfg)
	if err != nil {
		return nil, d.explain(d.session, err)
	}
	return m, nil
}

// closeEngines closes the PostgreSQL pools the last step opened.
func (d *demo) closeEngines() {
	for _, eng := range d.engines {
		eng.Close()
	}
	d.engines = nil
}

// explain is explain for the demo's database.
func (d *demo) explain(session string, err error) error {
	if d.server {
		return explainServer(redactURL(d.path), session, err)
	}
	return explain(d.path, session, err)
}

// where is what holds the session, for the walk-through's prose.
func (d *demo) where() string {
	if d.server {
		return "database"
	}
	return "file"
}

func (d *demo) heading(s string) { fmt.Fprintf(d.w, "\n== %s\n", s) }

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.w, "   "+format+"\n", args...) }

// add appends one message, timing it.
func (d *demo) add(ctx context.Context, m *persistent.Manager, msg ctxstore.Message) error {
	t := time.Now()
	if err := m.AddMessage(ctx, msg); err != nil {
		return d.explain(d.session, fmt.Errorf("demo: add to session %q: %w", d.session, err))
	}
	d.appends = append(d.appends, time.Since(t))
	return nil
}

// toolCall builds an assistant message calling one tool.
func toolCall(id, name string, args map[string]any) ctxstore.Message {
	a, _ := json.Marshal(args)
	b, _ := json.Marshal(map[string]any{
		"role": "assistant", "content": nil,
		"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(a)}}},
	})
	return ctxstore.MustParseMessage(b)
}

// turns plays n exchanges: a question, a tool call, its (long) result, an answer.
func (d *demo) turns(ctx context.Context, m *persistent.Manager, n int) error {
	topics := []string{"disk usage", "failed backups", "nginx errors", "the cron jobs", "memory pressure", "ssh logins", "the certificate expiry", "slow DNS"}
	for range n {
		d.turn++
		topic := topics[d.turn%len(topics)]
		id := fmt.Sprintf("call_%03d", d.turn)
		var log strings.Builder
		for i := range 40 {
			fmt.Fprintf(&log, "2026-11-%02d 03:%02d:%02d pantry %s: check %d of %s ok\n", 1+d.turn%28, i, (i*7)%60, topic, i, topic)
		}
		msgs := []ctxstore.Message{
			ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("Turn %d: can you look into %s on pantry? I noticed something odd this morning and I would like to know whether I need to do anything about it before the weekend.", d.turn, topic)),
			toolCall(id, "run_command", map[string]any{"host": "pantry", "command": "journalctl --since today | grep '" + topic + "'"}),
			ctxstore.NewToolResult(id, log.String()),
			ctxstore.NewMessage(ctxstore.RoleAssistant, fmt.Sprintf("Checked %s: 40 entries today, all ok. Nothing to do before the weekend.", topic)),
		}
		for _, msg := range msgs {
			if err := d.add(ctx, m, msg); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *demo) firstRun(ctx context.Context) error {
	d.heading("Run 1: the assistant starts")
	m, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	// A fresh session accepts the host's transcript: here, its system prompt.
	if err := m.SetMessages(ctx, []ctxstore.Message{ctxstore.NewMessage(ctxstore.RoleSystem, "You are Ana's home-server assistant. Use tools to check before answering.")}); err != nil {
		return d.explain(d.session, err)
	}
	for _, ev := range d.log.Take() {
		if inc, ok := ctxstore.IncludeOf(ev.Name, ev.Data); ok {
			d.say("memory file %v became a system message (%s)", inc.Source, ctxstore.EventInclude)
		}
	}
	if err := d.turns(ctx, m, 12); err != nil {
		return err
	}
	ms, err := m.GetMessages(ctx)
	if err != nil {
		return err
	}
	d.say("fresh session %q: SetMessages accepted; %d messages now (user questions, run_command calls, their results, answers)", d.session, len(ms))
	durable := "log record + fdatasync"
	if d.server {
		durable = "PostgreSQL commit, synchronous_commit on"
	}
	d.say("every append is durable when it returns (%s): median %v", durable, median(d.appends))
	d.say("the process exits")
	return m.Close()
}

func (d *demo) restart(ctx context.Context) error {
	d.heading("Run 2: restart on the same " + d.where())
	t := time.Now()
	m, err := d.open(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	opened := time.Since(t)
	ms, err := m.GetMessages(ctx)
	if err != nil {
		return err
	}
	d.say("resumed in %v: %d messages came back from the %s", opened.Round(10*time.Microsecond), len(ms), d.where())
	// The host restores its own, filtered copy of the transcript, as
	// Amplifier hosts do on resume: the last few messages, no system prompt.
	filtered := ms[len(ms)-3:]
	if err := m.SetMessages(ctx, filtered); err != nil {
		return d.explain(d.session, err)
	}
	after, err := m.GetMessages(ctx)
	if err != nil {
		return err
	}
	ignored := false
	for _, ev := range d.log.Take() {
		if r, ok := ctxstore.ResumeOf(ev.Name, ev.Data); ok && r.IgnoredSetMessages {
			ignored = true
		}
	}
	d.say("the host calls SetMessages with its filtered transcript (%d messages): ignored=%v, the session still holds %d", len(filtered), ignored, len(after))
	d.say("the %s is authoritative once a session has history (the resume rule)", d.where())
	if err := d.turns(ctx, m, 12); err != nil {
		return err
	}
	d.say("the conversation goes on: %d more turns", 12)

	d.heading(fmt.Sprintf("The full history beside the view sent to the model (budget %d tokens)", d.budget))
	req := ctxstore.Request{TokenBudget: d.budget}
	t = time.Now()
	rep, err := viewreport.Of(ctx, m, d.log, req)
	if err != nil {
		return explain(m.Store().Location(), m.Session(), err)
	}
	first := time.Since(t)
	printViewReport(d.w, rep, false)
	for _, ev := range rep.Events {
		d.say("event %s %s", ev.Name, compactData(ev.Data))
	}
	// One more exchange, then the next request: sticky decisions keep the
	// prefix, and the work is proportional to what was appended.
	if err := d.turns(ctx, m, 1); err != nil {
		return err
	}
	t = time.Now()
	if _, err := m.GetMessagesForRequest(ctx, req); err != nil {
		return err
	}
	next := time.Since(t)
	d.log.Take()
	d.say("view time: %v for the first request after the restart, %v for the next one after one more turn", first.Round(time.Microsecond), next.Round(time.Microsecond))
	return m.Close()
}

func (d *demo) crash(ctx context.Context) error {
	d.heading("Run 3: a crash in the middle of a tool call")
	m, err := d.open(ctx)
	if err != nil {
		return err
	}
	if err := d.add(ctx, m, ctxstore.NewMessage(ctxstore.RoleUser, "Please restart nginx on pantry.")); err != nil {
		m.Close()
		return err
	}
	if err := d.add(ctx, m, toolCall("call_restart", "run_command", map[string]any{"host": "pantry", "command": "systemctl restart nginx"})); err != nil {
		m.Close()
		return err
	}
	d.say("the assistant calls run_command(systemctl restart nginx) and the process dies before the result is stored")
	m.Close() // as good as a crash: both messages were already durable

	m, err = d.open(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	repaired, err := m.RepairInterruptedTail(ctx)
	if err != nil {
		return d.explain(d.session, err)
	}
	d.say("restart: RepairInterruptedTail answered %v with %q in views", repaired, persistent.InterruptedText)
	d.say("(saved as a repair record; the log itself is never rewritten, so a provider never sees a call without its result)")
	view, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: d.budget})
	if err != nil {
		return err
	}
	d.log.Take()
	d.say("the view now ends with:")
	for _, msg := range view[max(len(view)-4, 0):] {
		if msg.Source() == "context-compaction" {
			continue
		}
		d.say("  %-9s %s", msg.Role(), oneLine(msg, 80))
	}
	return m.Close()
}

func (d *demo) summary(ctx context.Context) error {
	if d.server {
		return d.serverSummary(ctx)
	}
	d.heading("The file")
	st, err := d.a.openAt(ctx, d.path, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	info, err := st.Session(ctx, d.session)
	if err != nil {
		return d.explain(d.session, err)
	}
	fi, err := os.Stat(d.path)
	if err != nil {
		return err
	}
	d.say("%s: %s holding %d messages, ~%d tokens, %s of message JSON", filepath.Base(d.path), human(fi.Size()), info.Messages, info.Tokens, human(info.Bytes))
	d.say("appends: %d, median %v, slowest %v (durable: each one fsynced)", len(d.appends), median(d.appends), slices.Max(d.appends).Round(time.Microsecond))
	return nil
}

// serverSummary is summary for a PostgreSQL database.
func (d *demo) serverSummary(ctx context.Context) error {
	d.heading("The database")
	st, err := d.a.openAt(ctx, d.path, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	info, err := st.Session(ctx, d.session)
	if err != nil {
		return explainIn(st, d.session, err)
	}
	d.say("%s: session %q holds %d messages, ~%d tokens, %s of message JSON", st.Location(), d.session, info.Messages, info.Tokens, human(info.Bytes))
	d.say("appends: %d, median %v, slowest %v (durable: each one committed synchronously)", len(d.appends), median(d.appends), slices.Max(d.appends).Round(time.Microsecond))
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond)
}

// compactData prints an event's data on one line, keys sorted.
func compactData(data map[string]any) string {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Sprint(data)
	}
	return string(b)
}
