package govern

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage"
)

// KilledSession is the session a killed eraser works on.
const KilledSession = "s"

// EraseChild is the body of an erasing child process: it says "open",
// waits for a line on stdin, erases the messages of KilledSession holding
// marker, says "done <nanoseconds>" and closes e.
func EraseChild(e storage.Engine, marker string, drop []string) error {
	fmt.Println("open")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	seqs, err := storage.MatchSeqs(ctx, e, KilledSession, marker)
	if err != nil {
		return err
	}
	if _, err := storage.Erase(ctx, e, KilledSession, drop, seqs...); err != nil {
		return err
	}
	fmt.Println("done", time.Since(start).Nanoseconds())
	return e.Close()
}

// EraseOutcome compares KilledSession as a killed eraser left it (got)
// with what it held before (want): "complete" when every message holding
// marker is erased in its place, "not begun" when none is. Anything else
// (half erased, another message changed) fails the test.
func EraseOutcome(t testing.TB, want, got []storage.Entry, marker string) string {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages after kill, want %d", len(got), len(want))
	}
	erased, kept := 0, 0
	for i, w := range want {
		g := got[i]
		if !bytes.Contains(w.Raw, []byte(marker)) {
			if !bytes.Equal(g.Raw, w.Raw) || g.Seq != w.Seq {
				t.Fatalf("seq %d damaged: %s", w.Seq, g.Raw)
			}
			continue
		}
		m, err := g.Message()
		switch {
		case err == nil && storage.IsErased(m) && bytes.Contains(g.Raw, []byte(storage.ErasedText)) && g.Role == w.Role && g.Seq == w.Seq &&
			g.Tokens == storage.ErasedTokens(m, w.Counter):
			erased++
		case bytes.Equal(g.Raw, w.Raw) && g.Tokens == w.Tokens:
			kept++
		default:
			t.Fatalf("seq %d neither erased nor intact: %s", w.Seq, g.Raw)
		}
	}
	switch {
	case erased > 0 && kept > 0:
		t.Fatalf("half erased: %d erased, %d kept", erased, kept)
	case erased > 0:
		return "complete"
	}
	return "not begun"
}
