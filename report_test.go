package ctxstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/simple"
)

// TestViewReport: the report a host prints from Explain says what the
// view holds, what was not sent and where each row came from, for both
// managers, and is safe on a terminal.
func TestViewReport(t *testing.T) {
	ctx := context.Background()
	mem, _ := simple.New(simple.Config{})
	file, err := persistent.Open(filepath.Join(t.TempDir(), "r.db"), "chat", persistent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct {
		name   string
		m      ctxstore.Manager
		header string
	}{
		{"in memory", mem, "full history 61 messages"},
		{"persistent", file, `session "chat", epoch 1: full history 61 messages`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add := func(m ctxstore.Message) {
				if err := tc.m.AddMessage(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			add(ctxstore.NewMessage(ctxstore.RoleSystem, "You are terse."))
			for i := range 20 {
				add(ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("question %d \x1b]0;owned\x07 %s", i, strings.Repeat("word ", 80))))
				add(ctxstore.NewToolCallMessage("", ctxstore.ToolCall{ID: fmt.Sprint("c", i), Name: "look", Arguments: []byte(`{"q":1}`)}))
				add(ctxstore.NewToolResult(fmt.Sprint("c", i), strings.Repeat("result ", 100)))
			}
			v, err := tc.m.(ctxstore.Explainer).Explain(ctx, ctxstore.Request{TokenBudget: 2000})
			if err != nil {
				t.Fatal(err)
			}
			rep := v.Report(ctxstore.ReportOptions{Warnings: []string{"a \x1b[2J warning"}})
			lines := strings.Split(rep, "\n")
			if !strings.HasPrefix(lines[0], tc.header) {
				t.Errorf("first line %q, want it to start %q", lines[0], tc.header)
			}
			for _, want := range []string{"budget 2000 tokens (explicit): view ", "compaction level", "not sent as stored", "#1 ", "→ look {\"q\":1}", "warning: a \\x1b[2J warning", "\\x1b]0;owned\\x07"} {
				if !strings.Contains(rep, want) {
					t.Errorf("report lacks %q:\n%s", want, rep)
				}
			}
			if strings.ContainsRune(rep, 0x1b) {
				t.Errorf("report carries a raw escape character")
			}
			if n := len(v.NotSent()); n == 0 || v.NotSent()[0][0] < 2 || v.LastSeq != 61 || v.FirstSeq != 1 {
				t.Errorf("NotSent %v, seqs %d-%d; want ranges after the system message, seqs 1-61", v.NotSent(), v.FirstSeq, v.LastSeq)
			}
			rows := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "- ") {
					rows++
				}
			}
			if rows != len(v.Messages) {
				t.Errorf("%d rows for %d messages", rows, len(v.Messages))
			}
			full := v.Report(ctxstore.ReportOptions{Full: true})
			if !strings.Contains(full, "    "+strings.Repeat("result ", 3)) && !strings.Contains(full, "    question 19") {
				t.Errorf("--full report has no indented text:\n%s", full)
			}
		})
	}
}

// TestManagerSessions: a persistent manager lists the sessions of its
// file, its own included once written.
func TestManagerSessions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	for _, name := range []string{"b", "a"} {
		m, err := persistent.Open(path, name, persistent.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.AddMessage(ctx, ctxstore.NewMessage("user", "hi "+name)); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	m, err := persistent.Open(path, "c", persistent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := m.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range infos {
		got = append(got, fmt.Sprintf("%s:%d:%s", s.Name, s.Messages, s.Title))
	}
	if strings.Join(got, " ") != "a:1:hi a b:1:hi b" {
		t.Errorf("Sessions = %v", got)
	}
	m.Close()
	if _, err := m.Sessions(ctx); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Sessions after Close = %v, want ErrClosed", err)
	}
}
