package persistent

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/tokens"
)

// TestConformance runs the contract suite on managers backed by a fresh
// file each, with the default estimator so budgets are checked too.
func TestConformance(t *testing.T) {
	ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: tokens.O200k(), KeepsFirstUser: true, ShortensToolResults: true}, func(t *testing.T) ctxstore.Manager {
		// Durability is the store's to test; here fsync would only make
		// the suite's thousands of appends slow.
		m, err := Open(filepath.Join(t.TempDir(), "conformance.db"), "conformance", Config{noSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	})
}
