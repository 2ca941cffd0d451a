package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// TestConformance runs the engine conformance suite on real files; the
// second handle is a second Store on the same file, as another process
// would open it.
func TestConformance(t *testing.T) {
	storagetest.Run(t, fileOpener)
}

// fileOpener opens a store on a new file, and other handles on it.
func fileOpener(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
	return wrappedOpener(func(st *Store) storage.Engine { return st })(t)
}

// wrappedOpener is fileOpener with each Store handed to the suite as wrap
// makes it.
func wrappedOpener(wrap func(*Store) storage.Engine) storagetest.Opener {
	return func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		path := filepath.Join(t.TempDir(), "store.db")
		open := func(t *testing.T) storage.Engine {
			st, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return wrap(st)
		}
		return open(t), open
	}
}
