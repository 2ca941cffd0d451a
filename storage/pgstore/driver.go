package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/storage"
)

// The PostgreSQL engine opens the postgres:// and postgresql:// targets
// of storage.Open, and keyword/value connection strings ("host=h
// dbname=d"), which its driver claims: importing this package, even
// blank, makes it available.
func init() {
	storage.Register("postgres", driver{claims: true})
	storage.Register("postgresql", driver{})
}

// driver is the engine's storage.Driver: a storage.Claimer of keyword/value
// connection strings (for one scheme only), and a storage.Redacter of
// passwords.
type driver struct{ claims bool }

// Open opens the database target names (openTarget).
func (driver) Open(ctx context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	return openTarget(ctx, target, opts)
}

// Claims reports whether target is a keyword/value connection string: its
// first keyword is libpq's (host=, dbname=, user=…).
func (d driver) Claims(target string) bool { return d.claims && pgdsn.Is(target) }

// Redact is target with its password and sslpassword replaced by "xxxxx".
func (driver) Redact(target string) string { return pgdsn.Redact(target) }

// Shareable is target without its password and sslpassword; note says
// which were left out and how to give them.
func (driver) Shareable(target string) (s, note string) {
	s, hidden, sslHidden := pgdsn.Shareable(target)
	switch {
	case hidden && sslHidden:
		note = "password left out: set PGPASSWORD or use ~/.pgpass; sslpassword left out: add it back"
	case hidden:
		note = "password left out: set PGPASSWORD or use ~/.pgpass"
	case sslHidden:
		note = "sslpassword left out: add it back"
	}
	return s, note
}

// openTarget opens the database target names for storage.Open. A "schema"
// parameter (a URL's query parameter, or a schema= pair) picks the schema
// holding ctxstore's tables (DefaultSchema without one); it is taken out of
// the connection string, which the driver would otherwise send the server
// as a setting. With MustExist, a schema without ctxstore's tables fails
// with storage.ErrNoStore, creating nothing (a read-only open fails with
// ErrNoSchema, which matches storage.ErrNoStore, either way).
func openTarget(ctx context.Context, target string, opts storage.OpenOptions) (storage.Engine, error) {
	conn, schema, err := splitSchema(target)
	if err != nil {
		return nil, err
	}
	if opts.MustExist {
		found, err := SchemaExists(ctx, conn, schema)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w at %s: no ctxstore tables in schema %q (%s)", storage.ErrNoStore, pgdsn.Redact(target), schema, schemaParam)
		}
	}
	st, err := Open(ctx, conn, Options{Schema: schema, ReadOnly: opts.ReadOnly})
	if errors.Is(err, storage.ErrNoStore) {
		return nil, fmt.Errorf("%w (%s)", err, schemaParam)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// schemaParam is what a target's error says of the schema it names, when
// the schema holds no ctxstore tables: perhaps another was meant.
const schemaParam = `the connection string's schema= parameter picks the schema, "` + DefaultSchema + `" without one`

// splitSchema takes the "schema" parameter out of a connection string;
// without one the schema is DefaultSchema. It decodes nothing but the
// parameters, so a password the URL does not encode is left for Open to
// refuse, never quoted in an error. A parameter that is not validly
// percent-encoded fails with ErrBadDSN, an empty schema with ErrSchemaName.
func splitSchema(dsn string) (conn, schema string, err error) {
	conn, schema, found, err := pgdsn.Cut(dsn, "schema")
	if err != nil {
		return "", "", fmt.Errorf("pgstore: open %s: the schema= parameter is not validly percent-encoded: %v: %w", pgdsn.Redact(dsn), err, ErrBadDSN)
	}
	if !found {
		return dsn, DefaultSchema, nil
	}
	if schema == "" {
		return "", "", fmt.Errorf("pgstore: open %s: the schema= parameter is empty: name a schema, or leave the parameter out for %q: %w", pgdsn.Redact(dsn), DefaultSchema, ErrSchemaName)
	}
	return conn, schema, nil
}

// The PostgreSQL engine's own optional interface of package storage.
var _ storage.CounterSplitter = (*Store)(nil)
