package persistent

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/simple"
	"github.com/ctxstore/ctxstore/storage"
)

// An erase by another process while a view is being computed (here from
// inside the summarizer, which has been given the text to erase) must not
// be undone by saving the view's decisions: the summary built from the
// erased message is not written after the erase dropped the summaries.
// Also when the manager caught up with the erase before the view was done
// (Info, called by another goroutine of the host, here from inside the
// summarizer): the summary is neither saved nor kept for the next view.
func TestDecisionsNotSavedOverAnErase(t *testing.T) {
	for _, caughtUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("caught_up=%v", caughtUp), func(t *testing.T) {
			testDecisionsNotSavedOverAnErase(t, caughtUp)
		})
	}
}

func testDecisionsNotSavedOverAnErase(t *testing.T, caughtUp bool) {
	ctx := context.Background()
	const marker = "wombatSECRET2718"
	path := dbPath(t)
	other := otherStore(t, path)
	var m *Manager
	m = open(t, path, "s", eraseWhileSummarizing(t, other, marker, func() {
		if !caughtUp {
			return
		}
		if _, err := m.Info(ctx); err != nil {
			t.Error(err)
		}
	}))
	addAll(t, m, append([]ctxstore.Message{user("my key is " + marker)}, conversation(60, 400)...))
	if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000}); err != nil {
		t.Fatal(err)
	}
	settled(t, m)
	for d, err := range other.ListDerived(ctx, "s", KindView) {
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(d.Value, []byte(marker)) {
			t.Fatalf("the view record %s saved after the erase holds the erased text", d.Key)
		}
	}
	// Nor does this process's next view send it to the model.
	res, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range res {
		if bytes.Contains(msg.Bytes(), []byte(marker)) {
			t.Fatalf("the next view still carries the erased text: %s", msg.Bytes())
		}
	}
}

// eraseWhileSummarizing is the config of a manager whose summarizer,
// the first time it is called, erases the messages of session "s" holding
// marker through other (another process's handle, as it were), then calls
// then; it summarizes with echoSummary.
func eraseWhileSummarizing(t *testing.T, other storage.Engine, marker string, then func()) Config {
	ctx := context.Background()
	var once sync.Once
	return Config{noSync: true, Config: simple.Config{Strategy: "summarize",
		Summarizer: func(_ context.Context, msgs []ctxstore.Message) (string, error) {
			once.Do(func() {
				seqs, err := storage.MatchSeqs(ctx, other, "s", marker)
				if err == nil && len(seqs) == 0 {
					t.Error("the marker is not in the session")
				}
				if _, err := storage.Erase(ctx, other, "s", EraseDrops(), seqs...); err != nil {
					t.Error(err)
				}
				then()
			})
			return echoSummary(marker, msgs), nil
		}}}
}

// echoSummary summarizes msgs as a model given their text would: marker,
// when one of them holds it, comes back in the summary.
func echoSummary(marker string, msgs []ctxstore.Message) string {
	for _, msg := range msgs {
		if bytes.Contains(msg.Bytes(), []byte(marker)) {
			return "the user's key is " + marker
		}
	}
	return "the user gave no key"
}

// An erase through persistent's list (EraseDrops) by another handle drops
// the summary a manager saved over the erased text: neither that manager's
// next request nor one of a manager opened afterwards carries it, and no
// saved view decision holds it; the learned usage ratio stays.
func TestEraseDropsSummaries(t *testing.T) {
	ctx := context.Background()
	const marker = "numbatSECRET3141"
	path := dbPath(t)
	cfg := Config{noSync: true, Config: simple.Config{Strategy: "summarize",
		Summarizer: func(_ context.Context, msgs []ctxstore.Message) (string, error) {
			return echoSummary(marker, msgs), nil
		}}}
	m := open(t, path, "s", cfg)
	addAll(t, m, append([]ctxstore.Message{user("my key is " + marker)}, conversation(60, 400)...))
	carries := func(m *Manager) bool {
		t.Helper()
		res, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000})
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range res {
			if bytes.Contains(msg.Bytes(), []byte(marker)) {
				return true
			}
		}
		return false
	}
	if !carries(m) {
		t.Fatal("the view before the erase carries no summary of the marker: the test shows nothing")
	}
	other := otherStore(t, path)
	saved := func() (n int) {
		settled(t, m)
		for d, err := range other.ListDerived(ctx, "s", KindView) {
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(d.Value, []byte(marker)) {
				n++
			}
		}
		return n
	}
	if saved() == 0 {
		t.Fatal("no saved view decision holds the summary before the erase")
	}
	if err := storage.PutDerived(ctx, other, "s", KindUsage, usageKey, []byte(`{"ratio":1.2,"counter":"x","reports":3}`)); err != nil {
		t.Fatal(err)
	}
	seqs, err := storage.MatchSeqs(ctx, other, "s", marker)
	if err != nil || len(seqs) != 1 {
		t.Fatalf("MatchSeqs = %v, %v", seqs, err)
	}
	res, err := storage.Erase(ctx, other, "s", EraseDrops(), seqs...)
	if err != nil || res.DroppedDerived == 0 {
		t.Fatalf("erase: %+v %v; want the saved decisions dropped", res, err)
	}
	if n := saved(); n != 0 {
		t.Fatalf("%d saved view decisions hold the erased text after the erase", n)
	}
	if _, err := storage.GetDerived(ctx, other, "s", KindUsage, usageKey); err != nil {
		t.Fatalf("the usage ratio went with the erase: %v", err)
	}
	if carries(m) {
		t.Fatal("the manager's next request carries the summary of the erased text")
	}
	if carries(open(t, path, "s", cfg)) {
		t.Fatal("a manager opened after the erase sends the summary of the erased text")
	}
	if n := saved(); n != 0 {
		t.Fatalf("%d saved view decisions hold the erased text after the next requests", n)
	}
}
