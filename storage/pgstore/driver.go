package pgstore

import (
	"context"
	"fmt"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/storage"
)

// The PostgreSQL engine opens the postgres:// and postgresql:// targets
// of storage.Open: importing this package, even blank, makes it available.
func init() {
	for _, scheme := range []string{"postgres", "postgresql"} {
		storage.Register(scheme, storage.DriverFunc(openTarget))
	}
}

// openTarget opens the database a postgres:// URL names for storage.Open.
// A "schema" query parameter picks the schema holding ctxstore's tables
// (DefaultSchema without one); it is taken out of the URL, which the
// driver would otherwise send the server as a setting. Only that parameter
// is decoded here: the rest, password included, goes to Open as written,
// whose errors never show the password.
func openTarget(ctx context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	conn, schema, found, err := pgdsn.Cut(target, "schema")
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: the schema= parameter is not validly percent-encoded: %w", pgdsn.Redact(target), err)
	}
	o := Options{Schema: DefaultSchema, ReadOnly: opts.ReadOnly}
	if found {
		if o.Schema = schema; o.Schema == "" {
			return nil, fmt.Errorf("pgstore: open: the schema= parameter is empty: name a schema, or leave the parameter out for %q", DefaultSchema)
		}
	}
	st, err := Open(ctx, conn, o)
	if err != nil {
		return nil, err
	}
	return st, nil
}
