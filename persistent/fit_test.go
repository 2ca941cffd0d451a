package persistent

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view/viewtest"
)

// TestViewsFitByExactCount: the fit property of simple's test of the same
// name (viewtest.CheckFit) holds for a manager on a store file: every view
// of every strategy, at budgets from 2k to 200k, fits by the exact
// o200k_base count of what is sent, and is reported over budget only when
// the floor alone does not fit.
func TestViewsFitByExactCount(t *testing.T) {
	viewtest.CheckFit(t, filepath.Join("..", "testdata", "tokens"), func(t *testing.T, cfg ctxstore.Config) viewtest.FitManager {
		// Durability is not what this test checks: no fsync.
		return open(t, dbPath(t), "fit", Config{Config: cfg, noSync: true})
	})
}
