package pgstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/testkit"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// eraseDrops is the kind of derived records this package's erases drop, as
// a caller's own: these tests keep none (storagetest checks the dropping).
var eraseDrops = []string{"summary"}

// TestErase runs the erase and purge checks on PostgreSQL: the marker is
// looked for in a pg_dump of the schema, as text, as the lower-case terms
// the search index keeps, and hex-encoded as pg_dump writes bytea.
func TestErase(t *testing.T) {
	dsn := testDSN(t)
	storagetest.RunErase(t, schemaOpener(dsn), func(t *testing.T, e storage.Engine, marker []byte) []string {
		t.Helper()
		out, err := exec.Command("pg_dump", "--data-only", "--schema="+e.(*Store).name, dsn).Output()
		if err != nil {
			t.Skipf("pg_dump: %v", err)
		}
		var where []string
		lower := bytes.ToLower(marker)
		for _, needle := range [][]byte{marker, lower, []byte(hex.EncodeToString(marker)), []byte(hex.EncodeToString(lower))} {
			if bytes.Contains(out, needle) {
				where = append(where, "pg_dump ("+string(needle)+")")
			}
		}
		return where
	})
}

const pgCrashMarker = "dingoPG6631"

// TestPGEraseChild is not a test: it is the body of the erasing child
// processes of TestEraseKilledPG.
func TestPGEraseChild(t *testing.T) {
	testkit.Child(t, func(string) error {
		st, err := Open(context.Background(), os.Getenv(envDSN), Options{Schema: os.Getenv(envSchema)})
		if err != nil {
			return err
		}
		return storagetest.EraseInChild(st, pgCrashMarker, eraseDrops)
	})
}

// TestEraseKilledPG kills an erasing process at many points: the erase is
// then wholly in the rows or not at all, and every other row is as it was.
func TestEraseKilledPG(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dsn := testDSN(t)
	ctx := context.Background()
	outcomes := map[string]int{}
	took := testkit.KillPoints(12, 2, func(delay time.Duration) time.Duration {
		schema := freshSchema(t, dsn)
		st := openTest(t, dsn, schema)
		for j := range 60 {
			txt := "filler " + strconv.Itoa(j)
			if j%6 == 0 {
				txt = "secret " + pgCrashMarker
			}
			if _, _, err := st.Append(ctx, storagetest.KilledSession, storage.Record{Message: ctxstore.NewMessage("user", txt)}); err != nil {
				t.Fatal(err)
			}
		}
		want := allEntries(t, st)
		cmd := testkit.Command("TestPGEraseChild", "eraser", envDSN+"="+dsn, envSchema+"="+schema)
		cmd.Stderr = os.Stderr
		took := testkit.RunOrKill(t, cmd, delay)
		outcomes[storagetest.EraseOutcome(t, want, allEntries(t, st), pgCrashMarker)]++
		if r, err := st.Verify(ctx); err != nil || !r.OK() {
			t.Fatalf("verify: %v %v", r, err)
		}
		return took
	})
	t.Logf("an erase takes %v in the child; outcomes: %v", took, outcomes)
}

func allEntries(t *testing.T, st *Store) []storage.Entry {
	t.Helper()
	var out []storage.Entry
	for e, err := range st.Messages(context.Background(), storagetest.KilledSession, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}
