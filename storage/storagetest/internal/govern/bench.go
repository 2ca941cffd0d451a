package govern

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// BenchFork is storagetest.BenchFork.
func BenchFork(b *testing.B, e storage.Engine, n int) {
	ctx := context.Background()
	body := strings.Repeat("lorem ipsum ", 40)
	batch := make([]storage.Record, 0, 1000)
	for i := range n {
		m := ctxstore.NewMessage(ctxstore.RoleUser, fmt.Sprintf("%d %s", i, body))
		batch = append(batch, storage.Record{Message: m, Tokens: 120})
		if len(batch) == cap(batch) || i == n-1 {
			if _, _, err := storage.Append(ctx, e, "src", batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		rep, err := storage.Fork(ctx, e, "src", fmt.Sprintf("fork-%d", i), 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Messages != n {
			b.Fatalf("forked %d messages, want %d", rep.Messages, n)
		}
		i++
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchGC is storagetest.BenchGC.
func BenchGC(b *testing.B, e storage.Engine, sessions int) {
	ctx := context.Background()
	pol := storage.Retention{OlderThan: time.Nanosecond}
	round := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		makeSessions(b, e, round, sessions)
		round++
		pol.Now = time.Now().Add(time.Hour)
		b.StartTimer()
		rep, err := storage.GC(ctx, e, pol)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Sessions) != sessions {
			b.Fatalf("gc deleted %d sessions, want %d (skipped %d)", len(rep.Sessions), sessions, len(rep.Skipped))
		}
	}
	b.ReportMetric(float64(sessions)*float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
}

// makeSessions makes n sessions of a user question and an answer.
func makeSessions(b *testing.B, e storage.Engine, round, n int) {
	ctx := context.Background()
	now := time.Now().UTC()
	var batch []storage.SessionImport
	flush := func() {
		bi, ok := e.(storage.BulkImporter)
		if ok {
			if err := bi.ImportSessions(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		for i := range batch {
			if ok {
				continue
			}
			if err := storage.ImportSession(ctx, e, batch[i].Info, batch[i].EntrySeq()); err != nil {
				b.Fatal(err)
			}
		}
		batch = batch[:0]
	}
	for i := range n {
		name := fmt.Sprintf("gc-%d-%05d", round, i)
		q := ctxstore.NewMessage(ctxstore.RoleUser, "question "+name)
		a := ctxstore.NewMessage(ctxstore.RoleAssistant, "answer to "+name)
		batch = append(batch, storage.SessionImport{
			Info: storage.SessionInfo{Name: name, Created: now, Updated: now},
			Entries: []storage.Entry{
				{Session: name, Seq: 1, Epoch: 1, Time: now, Role: q.Role(), Tokens: 5, Raw: q.Bytes()},
				{Session: name, Seq: 2, Epoch: 1, Time: now, Role: a.Role(), Tokens: 5, Raw: a.Bytes()},
			},
		})
		if len(batch) == 1000 || i == n-1 {
			flush()
		}
	}
}
