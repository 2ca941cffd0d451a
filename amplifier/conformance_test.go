package amplifier_test

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/amplifier"
	"github.com/ctxstore/ctxstore/ctxstoretest"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/tokens"
)

// TestConformance runs the manager contract suite on the Session served to
// Amplifier, over a fresh file each, counting with its default counter
// (o200k_base) so budgets are checked too.
func TestConformance(t *testing.T) {
	ctxstoretest.TestManagerWith(t, ctxstoretest.Options{Estimator: tokens.O200k(), KeepsFirstUser: true, ShortensToolResults: true}, func(t *testing.T) ctxstore.Manager {
		// Durability is the engine's to test; here fsync would only make
		// the suite's thousands of appends slow.
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "conformance.db"), boltstore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := amplifier.OpenSession(amplifier.SessionConfig{Engine: st, Session: "conformance"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
