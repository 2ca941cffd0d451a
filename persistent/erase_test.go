package persistent

import (
	"context"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// A manager open while another process erases a message: its next view
// shows the erased message's marker, not the text it held in memory.
func TestErasedElsewhere(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	m := open(t, path, "s", Config{noSync: true})
	addAll(t, m, []ctxstore.Message{user("my password is emuPW8812"), user("next")})
	if got := strings.Join(texts(viewOf(t, m, 10_000)), "|"); !strings.Contains(got, "emuPW8812") {
		t.Fatalf("view before the erase: %q", got)
	}
	other := otherStore(t, path)
	seqs, err := storage.MatchSeqs(ctx, other, "s", "emuPW8812")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Erase(ctx, other, "s", seqs...); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(texts(viewOf(t, m, 10_000)), "|")
	if strings.Contains(got, "emuPW8812") || !strings.Contains(got, storage.ErasedText) {
		t.Fatalf("view after an erase elsewhere: %q", got)
	}
}
