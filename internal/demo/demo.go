// Package demo is the walk-through 'ctxstore demo' plays: a personal
// assistant's session across restarts, with a memory file, tool calls, a
// transcript the host offers and that is ignored, a tool call interrupted
// by a crash and repaired, the history beside the compacted view, the
// Hooks events and the timings. The command gives it a database and the
// ways to name it and explain errors (Env).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/viewreport"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
)

// demo is one run of the walk-through.
type demo struct {
	env     Env
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

// Env is what the walk-through needs of the command that runs it.
type Env struct {
	// Out receives the walk-through's text.
	Out io.Writer
	// Failed reports an error writing Out (the reader went away): the
	// walk-through stops.
	Failed func() error
	// Path is the database (a file, or a PostgreSQL URL); Kept says the
	// user named it (--db), so it stays to explore.
	Path string
	Kept bool
	// Budget is the token budget of the compacted view shown.
	Budget int
	// MemoryFile is a memory file the agent starts with.
	MemoryFile string
	// LockTimeout bounds the wait for a file's lock.
	LockTimeout time.Duration
	// Open opens the database at path, read-only or not.
	Open func(ctx context.Context, path string, readOnly bool) (storage.Engine, error)
	// Explain, ExplainServer and ExplainIn turn an error about a session
	// into a message that names the database (a file's path, a server)
	// and says what to do.
	Explain       func(path, session string, err error) error
	ExplainServer func(where, session string, err error) error
	ExplainIn     func(st storage.Engine, session string, err error) error
	// Redact hides a URL's password; Quote quotes a word for the shell.
	Redact, Quote func(string) string
	// OneLine shows a message in one line of at most max runes; Size
	// shows a number of bytes.
	OneLine func(m ctxstore.Message, max int) string
	Size    func(n int64) string
}

// Run plays the walk-through: a first run, two restarts, a crash in the
// middle of a tool call, and a summary.
func Run(ctx context.Context, env Env) error {
	d := &demo{env: env, w: env.Out, log: &viewreport.EventLog{}, budget: env.Budget, mem: env.MemoryFile, path: env.Path}
	var err error
	if d.session, d.server, err = d.freeSession(ctx, "assistant"); err != nil {
		return err
	}
	start := time.Now()
	if d.server {
		fmt.Fprintf(d.w, "ctxstore demo: an assistant's conversation kept in PostgreSQL, across restarts\n")
	} else {
		fmt.Fprintf(d.w, "ctxstore demo: an assistant's conversation kept in one bbolt file, across restarts\n")
	}
	if env.Kept {
		fmt.Fprintf(d.w, "database: %s, session %q\n", env.Redact(d.path), d.session)
	} else {
		fmt.Fprintf(d.w, "database: %s (temporary; 'ctxstore demo --db FILE' keeps it to explore)\n", d.path)
	}
	for _, step := range []func(context.Context) error{d.firstRun, d.restart, d.crash, d.summary} {
		err := step(ctx)
		d.closeEngines()
		if err != nil {
			return err
		}
		if err := env.Failed(); err != nil {
			return fmt.Errorf("demo: %w", err) // the reader went away
		}
	}
	fmt.Fprintf(d.w, "\ndemo done in %v\n", time.Since(start).Round(10*time.Millisecond))
	if env.Kept {
		q := env.Quote(env.Redact(d.path))
		fmt.Fprintf(d.w, "explore: ctxstore --db %s ls; ctxstore --db %s show %s; ctxstore --db %s view %s --budget %d\n",
			q, q, d.session, q, d.session, d.budget)
	}
	return nil
}

// freeSession returns base, or base-2, base-3, ... when a session of that
// name exists already (demo --db run twice on one database), and whether
// the database is a server's (its engine keeps no file of its own).
func (d *demo) freeSession(ctx context.Context, base string) (string, bool, error) {
	st, err := d.env.Open(ctx, d.path, false)
	if err != nil {
		return "", false, err
	}
	defer st.Close()
	_, file := st.(storage.FileEngine)
	name, err := d.freeName(ctx, st, base)
	return name, !file, err
}

// freeName is the first of base, base-2, base-3, ... that names no session
// in st.
func (d *demo) freeName(ctx context.Context, st storage.Engine, base string) (string, error) {
	name := base
	for i := 2; ; i++ {
		_, err := st.Session(ctx, name)
		if errors.Is(err, storage.ErrNotFound) {
			return name, nil
		}
		if err != nil {
			return "", d.env.ExplainIn(st, name, err)
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

func (d *demo) open(ctx context.Context) (*persistent.Manager, error) {
	cfg := persistent.Config{
		Config:      simple.Config{Hooks: d.log.Hook},
		MemoryFiles: []string{d.mem},
		LockTimeout: d.env.LockTimeout,
	}
	if d.server {
		// A pool of its own, as a restarted process would have; closed
		// when the step ends, after its managers.
		eng, err := d.env.Open(ctx, d.path, false)
		if err != nil {
			return nil, err
		}
		d.engines = append(d.engines, eng)
		cfg.LockTimeout = 0 // it configures a file
		m, err := persistent.OpenEngine(eng, d.session, cfg)
		if err != nil {
			return nil, d.env.ExplainIn(eng, d.session, err)
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
		return d.env.ExplainServer(d.env.Redact(d.path), session, err)
	}
	return d.env.Explain(d.path, session, err)
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
		return d.env.Explain(m.Store().Location(), m.Session(), err)
	}
	first := time.Since(t)
	io.WriteString(d.w, rep.Text(false))
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
		d.say("  %-9s %s", msg.Role(), d.env.OneLine(msg, 80))
	}
	return m.Close()
}

func (d *demo) summary(ctx context.Context) error {
	if d.server {
		return d.serverSummary(ctx)
	}
	d.heading("The file")
	st, err := d.env.Open(ctx, d.path, true)
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
	d.say("%s: %s holding %d messages, ~%d tokens, %s of message JSON", filepath.Base(d.path), d.env.Size(fi.Size()), info.Messages, info.Tokens, d.env.Size(info.Bytes))
	d.say("appends: %d, median %v, slowest %v (durable: each one fsynced)", len(d.appends), median(d.appends), slices.Max(d.appends).Round(time.Microsecond))
	return nil
}

// serverSummary is summary for a PostgreSQL database.
func (d *demo) serverSummary(ctx context.Context) error {
	d.heading("The database")
	st, err := d.env.Open(ctx, d.path, false)
	if err != nil {
		return err
	}
	defer st.Close()
	info, err := st.Session(ctx, d.session)
	if err != nil {
		return d.env.ExplainIn(st, d.session, err)
	}
	d.say("%s: session %q holds %d messages, ~%d tokens, %s of message JSON", st.Location(), d.session, info.Messages, info.Tokens, d.env.Size(info.Bytes))
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
