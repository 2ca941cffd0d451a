package storagetest_test

import (
	"path/filepath"
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// An engine's own tests run the suite from one test function,
//
//	func TestConformance(t *testing.T) { … }
//
// whose body is shown here for the bbolt engine. Each call of the opener
// makes a fresh, empty store file and returns it with a function that opens
// a second handle on the same file, as another process would. This example
// is compiled but not run: only a test receives a *testing.T.
func ExampleRun() {
	var t *testing.T // TestConformance's argument
	storagetest.Run(t, func(t *testing.T) (storage.Engine, func(t *testing.T) storage.Engine) {
		path := filepath.Join(t.TempDir(), "store.db")
		open := func(t *testing.T) storage.Engine {
			s, err := boltstore.Open(path, boltstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(t), open
	})
}
