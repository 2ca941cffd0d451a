package storagetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest/internal/fixture"
)

// entriesOf yields es, as an export does.
func entriesOf(es []storage.Entry) func(func(storage.Entry, error) bool) {
	return func(yield func(storage.Entry, error) bool) {
		for _, e := range es {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// exportOf reads session as an export does: its info, and the messages of
// every epoch.
func exportOf(t *testing.T, e storage.Engine, session string) (storage.SessionInfo, []storage.Entry) {
	t.Helper()
	si := info(t, e, session)
	var es []storage.Entry
	for _, ep := range si.Epochs {
		es = append(es, fixture.Collect(t, e.EpochMessages(context.Background(), session, ep.Epoch, 0))...)
	}
	return si, es
}

// checkImported compares the metadata of an imported session with want,
// start times of epochs aside.
func checkImported(t *testing.T, got, want storage.SessionInfo) {
	t.Helper()
	if got.Epoch != want.Epoch || got.EpochStartSeq != want.EpochStartSeq || got.LastSeq != want.LastSeq ||
		got.Messages != want.Messages || got.TotalMessages != want.TotalMessages || got.Title != want.Title ||
		!slices.Equal(got.PinnedSeqs, want.PinnedSeqs) || got.FirstUserSeq != want.FirstUserSeq || got.Importing {
		t.Errorf("imported session\n %+v\nwant\n %+v", got, want)
	}
	if !slices.Equal(withoutStart(got.Epochs), withoutStart(want.Epochs)) {
		t.Errorf("imported epochs\n %+v\nwant\n %+v", withoutStart(got.Epochs), withoutStart(want.Epochs))
	}
}

// verifyIntact fails unless Verify finds no damage.
func verifyIntact(t *testing.T, e storage.Engine, when string) {
	t.Helper()
	r, err := storage.Verify(context.Background(), e)
	if err != nil {
		t.Fatalf("verify %s: %v", when, err)
	}
	if !r.Intact() {
		t.Fatalf("verify %s:\n%s", when, r)
	}
}

// testImportRefused: ImportSession refuses metadata that contradicts
// itself or its entries with ErrInvalidImport (a message that does not
// parse with ErrInvalidMessage), naming the session, and stores nothing.
func testImportRefused(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	base := consistentExport
	cases := importRefusedCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A name of its own: one accepted by mistake does not
			// make the next fail for another reason.
			name := "bad: " + c.name
			si, es := base()
			es = c.change(&si, es)
			si.Name = name
			err := storage.ImportSession(ctx, e, si, entriesOf(es))
			want := storage.ErrInvalidImport
			if strings.Contains(c.name, "parse") {
				want = ctxstore.ErrInvalidMessage
			}
			if !errors.Is(err, want) {
				t.Fatalf("ImportSession = %v, want %v", err, want)
			}
			if !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Errorf("the error does not name the session: %v", err)
			}
			t.Logf("refused: %v", err)
			if got, err := e.Session(ctx, name); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("a refused import left the session: %+v %v", got, err)
			}
		})
	}
	verifyIntact(t, e, "after refused imports")
	if infos, err := e.Sessions(ctx); err != nil || len(infos) != 0 {
		t.Fatalf("refused imports left sessions: %+v %v", infos, err)
	}
	// The consistent export imports, and new messages continue after it.
	si, es := base()
	if err := storage.ImportSession(ctx, e, si, entriesOf(es)); err != nil {
		t.Fatalf("the consistent export: %v", err)
	}
	if f, _ := fixture.AppendOK(t, e, "bad", fixture.Text("user", "six")); f != 6 {
		t.Fatalf("append after import: seq %d", f)
	}
	verifyIntact(t, e, "after the consistent import")
}

// consistentExport is an export ImportSession accepts: epochs 1 (seqs
// 1-2), 2 (3-4) and 3 (5), current.
func consistentExport() (storage.SessionInfo, []storage.Entry) {
	raw := func(role, s string) []byte { return ctxstore.NewMessage(role, s).Bytes() }
	info := storage.SessionInfo{Name: "bad", Epoch: 3, LastSeq: 5, EpochStartSeq: 5, Epochs: []storage.EpochInfo{
		{Epoch: 1, FirstSeq: 1, LastSeq: 2, Messages: 2}, {Epoch: 2, FirstSeq: 3, LastSeq: 4, Messages: 2}, {Epoch: 3, FirstSeq: 5, LastSeq: 5, Messages: 1}}}
	es := []storage.Entry{
		{Seq: 1, Epoch: 1, Tokens: 1, Raw: raw("user", "one")}, {Seq: 2, Epoch: 1, Tokens: 1, Raw: raw("assistant", "two")},
		{Seq: 3, Epoch: 2, Tokens: 1, Raw: raw("user", "three")}, {Seq: 4, Epoch: 2, Tokens: 1, Raw: raw("assistant", "four")},
		{Seq: 5, Epoch: 3, Tokens: 1, Raw: raw("user", "five")}}
	return info, es
}

// importRefusal is one way of spoiling consistentExport.
type importRefusal struct {
	name   string
	change func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry
}

// importRefusedCases lists exports that contradict themselves or their
// entries, each made from consistentExport.
func importRefusedCases() []importRefusal {
	const big = 1 << 63 // over storage.MaxSeq
	type change func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry
	info := func(f func(si *storage.SessionInfo)) change {
		return func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry { f(si); return es }
	}
	entry := func(f func(es []storage.Entry)) change {
		return func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry { f(es); return es }
	}
	return []importRefusal{
		// The metadata by itself.
		{"epoch over MaxSeq", info(func(si *storage.SessionInfo) { si.Epoch = big })},
		{"last seq over MaxSeq", info(func(si *storage.SessionInfo) { si.LastSeq = big })},
		{"epoch start seq over MaxSeq", info(func(si *storage.SessionInfo) { si.EpochStartSeq = big })},
		{"negative message count", info(func(si *storage.SessionInfo) { si.Messages = -1 })},
		{"negative token count", info(func(si *storage.SessionInfo) { si.Tokens = -1 })},
		{"negative byte count", info(func(si *storage.SessionInfo) { si.Bytes = -1 })},
		{"negative total", info(func(si *storage.SessionInfo) { si.TotalMessages = -1 })},
		{"epoch list without a current epoch", info(func(si *storage.SessionInfo) { si.Epoch = 0 })},
		{"epoch 0 listed", info(func(si *storage.SessionInfo) { si.Epochs[0].Epoch = 0 })},
		{"epoch listed after the current", info(func(si *storage.SessionInfo) { si.Epochs[2].Epoch = 4 })},
		{"epochs out of order", info(func(si *storage.SessionInfo) { si.Epochs[0], si.Epochs[1] = si.Epochs[1], si.Epochs[0] })},
		{"epoch listed twice", info(func(si *storage.SessionInfo) { si.Epochs[1].Epoch = 1 })},
		{"negative epoch message count", info(func(si *storage.SessionInfo) { si.Epochs[0].Messages = -1 })},
		{"epoch seqs over MaxSeq", info(func(si *storage.SessionInfo) { si.Epochs[0].LastSeq = big })},
		{"epoch first seq 0", info(func(si *storage.SessionInfo) { si.Epochs[0].FirstSeq = 0 })},
		{"epoch ends before it starts", info(func(si *storage.SessionInfo) { si.Epochs[1].LastSeq = 1 })},
		{"epoch ends after the last seq", info(func(si *storage.SessionInfo) { si.Epochs[2].LastSeq = 6 })},
		{"last seq before the epochs end", info(func(si *storage.SessionInfo) { si.LastSeq = 1 })},
		{"epochs overlap", info(func(si *storage.SessionInfo) { si.Epochs[0].LastSeq = 3 })},
		{"current epoch purged", info(func(si *storage.SessionInfo) { si.Epochs[2].Purged = true })},
		{"epoch start seq not the current epoch's first", info(func(si *storage.SessionInfo) { si.EpochStartSeq = 4 })},
		{"current epoch ends before the last seq", info(func(si *storage.SessionInfo) { si.LastSeq = 7 })},
		{"epoch start seq inside an earlier epoch", info(func(si *storage.SessionInfo) {
			si.Epochs, si.EpochStartSeq = si.Epochs[:2], 4
		})},
		{"epoch start seq past the next seq", info(func(si *storage.SessionInfo) {
			si.Epochs, si.EpochStartSeq = si.Epochs[:2], 7
		})},
		// The entries against each other and the metadata.
		{"seqs out of order", entry(func(es []storage.Entry) { es[0].Seq, es[1].Seq = 2, 1 })},
		{"seq repeated", entry(func(es []storage.Entry) { es[1].Seq = 1 })},
		{"seq 0", entry(func(es []storage.Entry) { es[0].Seq = 0 })},
		{"epochs decrease", entry(func(es []storage.Entry) { es[3].Epoch = 1 })},
		{"entry epoch 0", entry(func(es []storage.Entry) { es[0].Epoch = 0 })},
		{"entry seq over MaxSeq", func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry {
			*si = storage.SessionInfo{Name: si.Name}
			es[4].Seq = big
			return es
		}},
		{"entry epoch over MaxSeq", func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry {
			*si = storage.SessionInfo{Name: si.Name}
			es[4].Epoch = big
			return es
		}},
		{"entry after the current epoch", entry(func(es []storage.Entry) { es[4].Epoch = 4 })},
		{"entry after the last seq", entry(func(es []storage.Entry) { es[4].Seq = 6 })},
		{"negative tokens", entry(func(es []storage.Entry) { es[2].Tokens = -1 })},
		{"entry outside its epoch's seqs", info(func(si *storage.SessionInfo) {
			si.Epochs[0].LastSeq, si.Epochs[1].FirstSeq = 1, 2
		})},
		{"entry of a purged epoch", info(func(si *storage.SessionInfo) { si.Epochs[0].Purged = true })},
		{"entry of an unlisted epoch inside a listed one", info(func(si *storage.SessionInfo) {
			si.Epochs = []storage.EpochInfo{{Epoch: 1, FirstSeq: 1, LastSeq: 3}, si.Epochs[2]}
		})},
		{"entry of the current epoch before its start", func(si *storage.SessionInfo, es []storage.Entry) []storage.Entry {
			si.Epochs = si.Epochs[:1]
			es[2].Epoch, es[3].Epoch = 3, 3
			return es
		}},
		{"entry of an earlier epoch after the current one's start", info(func(si *storage.SessionInfo) {
			si.Epochs, si.EpochStartSeq = si.Epochs[:1], 4
		})},
		{"message that does not parse", entry(func(es []storage.Entry) { es[2].Raw = []byte(`{"role":"user","content":`) })},
	}
}

// testImportShapes: exports of unusual but consistent sessions import
// exactly, on every engine: empty epochs left by Clear, a purged epoch,
// a session recreated after Purge, an import over a purged name, and
// metadata that leaves out what the entries tell.
func testImportShapes(t *testing.T, open Opener) {
	e, _ := open(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	clear := func(s string) {
		t.Helper()
		_, err := e.Clear(ctx, s)
		must(err)
	}
	// roundTrip imports the export of src as dst and checks that dst is
	// src under another name, and goes on after it.
	roundTrip := func(src, dst string) {
		t.Helper()
		si, es := exportOf(t, e, src)
		si.Name = dst
		must(storage.ImportSession(ctx, e, si, entriesOf(es)))
		checkImported(t, info(t, e, dst), si)
		_, got := exportOf(t, e, dst)
		if !slices.Equal(seqsOf(got), seqsOf(es)) {
			t.Errorf("%s holds seqs %v, %s %v", dst, seqsOf(got), src, seqsOf(es))
		}
		verifyIntact(t, e, "after importing "+dst)
		if f, _ := fixture.AppendOK(t, e, dst, fixture.Text("user", "next")); f != si.LastSeq+1 {
			t.Errorf("append to %s after import: seq %d, want %d", dst, f, si.LastSeq+1)
		}
		if got := info(t, e, dst); got.Epoch != si.Epoch || got.EpochStartSeq != si.EpochStartSeq {
			t.Errorf("append to %s after import moved it to epoch %d starting at %d, want %d at %d", dst, got.Epoch, got.EpochStartSeq, si.Epoch, si.EpochStartSeq)
		}
	}

	t.Run("empty epochs", func(t *testing.T) {
		fixture.AppendOK(t, e, "cleared", fixture.Text("system", "sys"), fixture.Text("user", "q"))
		clear("cleared")
		clear("cleared") // epoch 2 stays empty
		fixture.AppendOK(t, e, "cleared", fixture.Text("user", "r"))
		clear("cleared") // the current epoch, 4, is empty
		roundTrip("cleared", "cleared copy")
	})
	t.Run("purged epoch", func(t *testing.T) {
		fixture.AppendOK(t, e, "purged epoch", fixture.Text("user", "q"), fixture.Text("assistant", "a"))
		clear("purged epoch")
		fixture.AppendOK(t, e, "purged epoch", fixture.Text("user", "r"))
		must(storage.PurgeEpoch(ctx, e, "purged epoch", 1, fixture.EpochDrops))
		roundTrip("purged epoch", "purged epoch copy")
	})
	t.Run("recreated after purge", func(t *testing.T) {
		fixture.AppendOK(t, e, "recreated", fixture.Text("user", "q"), fixture.Text("assistant", "a"))
		must(e.Purge(ctx, "recreated"))
		fixture.AppendOK(t, e, "recreated", fixture.Text("user", "again")) // epoch 2, seq 3
		roundTrip("recreated", "recreated copy")
	})
	t.Run("over a purged name", func(t *testing.T) {
		// The name's tombstone has higher numbers than the export: the
		// import keeps the export's.
		fixture.AppendOK(t, e, "src", fixture.Text("user", "q"))
		clear("src")
		fixture.AppendOK(t, e, "src", fixture.Text("user", "r"))
		for range 3 {
			fixture.AppendOK(t, e, "gone", fixture.Text("user", "x"), fixture.Text("assistant", "y"))
			clear("gone")
		}
		must(e.Purge(ctx, "gone"))
		roundTrip("src", "gone")
	})

	raw := func(s string) []byte { return ctxstore.NewMessage("user", s).Bytes() }
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	ent := func(seq, epoch uint64) storage.Entry {
		return storage.Entry{Seq: seq, Epoch: epoch, Time: at.Add(time.Duration(seq) * time.Second), Tokens: 1, Raw: raw("m")}
	}
	ep := func(epoch, first, last uint64, n int) storage.EpochInfo {
		return storage.EpochInfo{Epoch: epoch, FirstSeq: first, LastSeq: last, Messages: n}
	}
	cases := []struct {
		name    string
		info    storage.SessionInfo
		entries []storage.Entry
		want    storage.SessionInfo // Title "m" added below
	}{
		{"metadata left out", storage.SessionInfo{},
			[]storage.Entry{ent(1, 1), ent(2, 1), ent(3, 2)},
			storage.SessionInfo{Epoch: 2, EpochStartSeq: 3, LastSeq: 3, Messages: 1, TotalMessages: 3, FirstUserSeq: 3,
				Epochs: []storage.EpochInfo{ep(1, 1, 2, 2), ep(2, 3, 3, 1)}}},
		{"epochs the list lacks", storage.SessionInfo{Epoch: 3, LastSeq: 5, Epochs: []storage.EpochInfo{ep(1, 1, 2, 2)}},
			[]storage.Entry{ent(1, 1), ent(2, 1), ent(3, 2), ent(4, 2), ent(5, 3)},
			storage.SessionInfo{Epoch: 3, EpochStartSeq: 5, LastSeq: 5, Messages: 1, TotalMessages: 5, FirstUserSeq: 5,
				Epochs: []storage.EpochInfo{ep(1, 1, 2, 2), ep(2, 3, 4, 2), ep(3, 5, 5, 1)}}},
		{"current epoch not listed", storage.SessionInfo{Epoch: 2, LastSeq: 2, Epochs: []storage.EpochInfo{ep(1, 1, 2, 2)}},
			[]storage.Entry{ent(1, 1), ent(2, 1)},
			storage.SessionInfo{Epoch: 2, EpochStartSeq: 3, LastSeq: 2, Messages: 0, TotalMessages: 2,
				Epochs: []storage.EpochInfo{ep(1, 1, 2, 2), ep(2, 3, 2, 0)}}},
		{"messages missing", storage.SessionInfo{Epoch: 2, LastSeq: 6, EpochStartSeq: 4, Epochs: []storage.EpochInfo{ep(1, 1, 3, 3), ep(2, 4, 6, 3)}},
			[]storage.Entry{ent(1, 1), ent(5, 2)},
			storage.SessionInfo{Epoch: 2, EpochStartSeq: 4, LastSeq: 6, Messages: 1, TotalMessages: 2, FirstUserSeq: 5,
				Epochs: []storage.EpochInfo{ep(1, 1, 3, 1), ep(2, 4, 6, 1)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "shape " + c.name
			c.info.Name = name
			must(storage.ImportSession(ctx, e, c.info, entriesOf(c.entries)))
			want := c.want
			want.Title = "m"
			checkImported(t, info(t, e, name), want)
			verifyIntact(t, e, "after importing "+name)
			if f, _ := fixture.AppendOK(t, e, name, fixture.Text("user", "next")); f != want.LastSeq+1 {
				t.Errorf("append after import: seq %d, want %d", f, want.LastSeq+1)
			}
			verifyIntact(t, e, "after appending to "+name)
		})
	}
}
