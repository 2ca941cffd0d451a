package main

// The engines the CLI opens: each registers itself with storage.Open, which
// picks one by --db's scheme. The CLI asks them through package storage
// alone; pgstore is also imported by name for its typed connection errors.
import (
	_ "github.com/ctxstore/ctxstore/storage/boltstore"
)
