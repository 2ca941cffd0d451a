package persistent

import (
	"bytes"
	"context"
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
func TestDecisionsNotSavedOverAnErase(t *testing.T) {
	ctx := context.Background()
	const marker = "wombatSECRET2718"
	path := dbPath(t)
	other := otherStore(t, path)
	var once sync.Once
	cfg := Config{noSync: true, Config: simple.Config{Strategy: "summarize",
		Summarizer: func(_ context.Context, msgs []ctxstore.Message) (string, error) {
			once.Do(func() {
				seqs, err := storage.MatchSeqs(ctx, other, "s", marker)
				if err == nil && len(seqs) == 0 {
					t.Error("the marker is not in the session")
				}
				if _, err := storage.Erase(ctx, other, "s", seqs...); err != nil {
					t.Error(err)
				}
			})
			for _, msg := range msgs { // given the text: it comes back in the summary
				if bytes.Contains(msg.Bytes(), []byte(marker)) {
					return "the user's key is " + marker, nil
				}
			}
			return "the user gave no key", nil
		}}}
	m := open(t, path, "s", cfg)
	addAll(t, m, append([]ctxstore.Message{user("my key is " + marker)}, conversation(60, 400)...))
	if _, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: 3000}); err != nil {
		t.Fatal(err)
	}
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
