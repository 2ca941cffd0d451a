package main

// The engines the CLI opens: each registers itself with storage.Open, which
// picks one by --db (a path, a postgres:// URL, or a connection string the
// PostgreSQL driver claims). The CLI asks them through package storage
// alone.
import (
	_ "github.com/ctxstore/ctxstore/storage/boltstore"
	_ "github.com/ctxstore/ctxstore/storage/pgstore"
)
