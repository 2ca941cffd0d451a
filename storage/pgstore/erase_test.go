package pgstore

import (
	"bytes"
	"encoding/hex"
	"os/exec"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

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
