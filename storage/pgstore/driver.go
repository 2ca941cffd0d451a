package pgstore

import (
	"context"
	"fmt"
	"net/url"

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
// driver would otherwise send the server as a setting.
func openTarget(ctx context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	u, err := url.Parse(target)
	if err != nil {
		// url.Error quotes the URL, password included: say only why.
		if e, ok := err.(*url.Error); ok {
			err = e.Err
		}
		return nil, fmt.Errorf("pgstore: open: not a valid PostgreSQL URL (postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?schema=NAME]): %w", err)
	}
	o := Options{Schema: DefaultSchema, ReadOnly: opts.ReadOnly}
	if q := u.Query(); q.Has("schema") {
		if o.Schema = q.Get("schema"); o.Schema == "" {
			return nil, fmt.Errorf("pgstore: open: the schema= parameter is empty: name a schema, or leave the parameter out for %q", DefaultSchema)
		}
		q.Del("schema")
		u.RawQuery = q.Encode()
	}
	st, err := Open(ctx, u.String(), o)
	if err != nil {
		return nil, err
	}
	return st, nil
}
