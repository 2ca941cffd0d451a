// Package pgstore keeps ctxstore's log in PostgreSQL, for hosts that share
// conversation memory across machines. It implements storage.Engine on pgx
// (a connection pool per Store); any number of processes on any number of
// hosts may use one database at once.
//
// What it guarantees:
//
//   - Message bytes come back exactly as appended (bytea, never jsonb).
//   - A write is durable when the call returns: every transaction commits
//     with synchronous_commit on. Writes made concurrently through one Store
//     share a transaction and its WAL flush (group commit), each still
//     checked, refused or failed as if it had been alone.
//   - Every write locks its session's row first and checks the session
//     inside that transaction, so conditional writes (AppendIf,
//     ReplaceEpoch, UpdateDerived) see every other writer's changes, and
//     seqs are allocated from the locked row: no gaps, no duplicates,
//     whatever the number of writers.
//   - Each append carries an idempotency key. When the connection is lost
//     during COMMIT, so that whether it committed is unknown, the engine
//     retries with the same key and gets the seqs the first attempt
//     stored, never a second copy.
//   - Watch listens on a dedicated connection (LISTEN/NOTIFY; payloads
//     carry identifiers only) and survives reconnects: after a drop it
//     listens again and rereads what it watches, so no change is missed.
//     Close ends every watch, closing its channel and its connection.
//   - Verify checks one snapshot (one read-only REPEATABLE READ
//     transaction), so writers running meanwhile do not show as damage;
//     ReadSnapshot's reads share one such transaction too, so they see
//     one state of the store.
//   - The schema is created and migrated by Open, under an advisory lock,
//     once however many hosts start together. Options.Schema names it, so
//     several deployments can share a database. Open reads the schema's
//     version first and takes that path only when the schema is missing or
//     older than the program, so a role that may only read and change the
//     tables (no CREATE) opens a current schema read-write.
//   - Options.ReadOnly opens for reading only, as a role with nothing but
//     SELECT can: Open creates and migrates nothing (a missing or older
//     schema fails with ErrNoSchema), every write fails with ErrReadOnly,
//     and the connections' transactions are read-only on the server too.
//   - Every key leads with the session, so a sharded PostgreSQL (Citus)
//     can distribute the tables by it.
//
// Errors name the server (host:port/database) and the session, never the
// password, whatever characters it holds. Failing to connect, Open returns
// a *ConnectError saying why: ErrBadDSN, ErrUnreachable, ErrAuth or
// ErrNoDatabase. A write the role has no privilege for fails with
// ErrReadOnly, the server's refusal kept in the chain.
//
// docs/engines.md describes this engine (its schema, roles, notifications);
// docs/scaling.md how its keys, connections and sessions scale.
package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxstore/ctxstore/internal/groupcommit"
	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/internal/watchset"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema Open uses when Options.Schema is empty.
const DefaultSchema = "ctxstore"

// ErrReadOnly means a write was refused: the Store was opened with
// Options.ReadOnly, or the server denied the role the privilege to change
// the tables. It is storage.ErrReadOnly, which the bbolt engine returns for
// a file opened read-only, so callers branch the same way on both.
var ErrReadOnly = storage.ErrReadOnly

// ErrNoSchema means a read-only Open found no ctxstore tables in the schema
// (or no schema), or a schema older than this program, which only a
// read-write Open brings up to date, by a role that may create in the
// schema (in the database, while the schema does not exist). The error names
// the server, the schema and, for an old schema, its version and the one
// needed. For a schema without ctxstore's tables (not an old one) it
// matches storage.ErrNoStore too.
// It matches storage.ErrNoSchema.
var ErrNoSchema error = noSchemaError{}

// noSchemaError is ErrNoSchema: storage.ErrNoSchema in this engine's words.
type noSchemaError struct{}

func (noSchemaError) Error() string        { return "pgstore: schema missing or not migrated" }
func (noSchemaError) Is(target error) bool { return target == storage.ErrNoSchema }

// noTablesError is ErrNoSchema for a schema without ctxstore's tables,
// which is also storage.ErrNoStore.
type noTablesError struct{}

func (noTablesError) Error() string { return ErrNoSchema.Error() }
func (noTablesError) Is(target error) bool {
	return target == ErrNoSchema || target == storage.ErrNoSchema || target == storage.ErrNoStore
}

// Options configure a Store. The zero value is the default.
type Options struct {
	// Schema is the PostgreSQL schema holding the tables, created if
	// missing (default "ctxstore"). Any name of at most MaxSchemaLen bytes
	// works: it is quoted. A longer one fails with ErrSchemaName rather
	// than be cut short by the server.
	Schema string
	// ReadOnly opens the schema for reading only: Open never creates or
	// migrates it (it fails with ErrNoSchema instead), every write fails
	// with ErrReadOnly, and the server runs the connections' transactions
	// read-only. A role with USAGE on the schema and SELECT on its tables
	// is enough.
	ReadOnly bool
	// MaxConns bounds the pool's connections (0: pgxpool's default, the
	// larger of 4 and the number of CPUs). Watch uses one more, of its own,
	// per call, until the watch ends (its context, or Close).
	MaxConns int32
	// OneSessionPerTransaction keeps each transaction to one session.
	// Concurrent writes of a process to different sessions otherwise share
	// a transaction, and its one WAL flush (group commit); on a sharded
	// PostgreSQL (Citus, with the tables distributed by session) such a
	// transaction spans shards, which needs a two-phase commit, and its
	// row locks, taken with one SELECT ... FOR UPDATE over several
	// sessions, a multi-shard locking query. Writes to one session still
	// share commits.
	OneSessionPerTransaction bool
}

// Store is a PostgreSQL database of sessions. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig // for Watch's dedicated connections
	server   string          // host:port/database, for messages
	password string          // to keep out of messages
	dsn      string          // the connection string without its password, for ConnectError
	user     string          // the role logged in, for messages
	schema   string          // quoted identifier
	name     string          // the schema's name, unquoted
	readOnly bool            // Options.ReadOnly
	apart    bool            // Options.OneSessionPerTransaction
	channel  string          // NOTIFY channel
	closed   atomic.Bool
	// The running watches: Close cancels each one's context and waits
	// for its goroutine, which closes its channel and its connection.
	watches watchset.Set
	q       queries
	commits groupcommit.Queue[*req] // the writes waiting for a commit (see submit)
	// beforeCommit and afterCommit, when set (by tests), run around each
	// write's COMMIT; an error from them is taken as the connection lost
	// at that moment.
	beforeCommit, afterCommit func() error
	// silent (set by tests) leaves out the notifications, as a writer that
	// dies right after its COMMIT would.
	silent bool
}

// Open connects to the database at dsn (a postgres:// URL or key=value
// string), creates or migrates the schema when it is missing or older than
// this program (not with Options.ReadOnly), and returns the Store. ctx
// bounds the connection and the migration.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := parseDSN(dsn, pgxpool.ParseConfig, func(c *pgxpool.Config) *pgconn.Config { return &c.ConnConfig.Config })
	if err != nil {
		return nil, err
	}
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if err := checkSchemaName(opts.Schema); err != nil {
		return nil, fmt.Errorf("pgstore %s: %w", serverName(cfg.ConnConfig), err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// Durable when a call returns, whatever the server's default or the
	// connection string asks.
	setParam(cfg.ConnConfig.RuntimeParams, "synchronous_commit", "on")
	if !hasParam(cfg.ConnConfig.RuntimeParams, "enable_bitmapscan") {
		// Reads ask for a page of a session in seq order, which the
		// primary key's index gives without reading further. Where the
		// planner underestimates a session's rows (a table not analyzed
		// yet, after an import; a large session missing from the
		// statistics) it picks a bitmap scan instead, which reads every
		// row of the session and sorts them to return a page.
		cfg.ConnConfig.RuntimeParams["enable_bitmapscan"] = "off"
	}
	if opts.ReadOnly {
		// Whatever slips past the checks, the server refuses to write.
		setParam(cfg.ConnConfig.RuntimeParams, "default_transaction_read_only", "on")
	}
	s := &Store{
		connCfg:  cfg.ConnConfig,
		dsn:      pgdsn.Redact(dsn),
		server:   serverName(cfg.ConnConfig),
		password: cfg.ConnConfig.Password,
		user:     cfg.ConnConfig.User,
		schema:   pgx.Identifier{opts.Schema}.Sanitize(),
		name:     opts.Schema,
		channel:  channelName(opts.Schema),
		readOnly: opts.ReadOnly,
		apart:    opts.OneSessionPerTransaction,
	}
	s.q = newQueries(s.schema)
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.errorf("", "connect: %w", err)
	}
	if err := s.prepare(ctx, opts.Schema); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// SchemaExists reports whether schema ("" for DefaultSchema) of the
// database at dsn holds ctxstore's tables, creating and migrating nothing.
// It uses a connection of its own, closed before it returns, so a caller
// can tell a missing schema from an empty one before a read-write Open
// would create it, or wait for another process to create it. Errors name
// the server, never the password.
func SchemaExists(ctx context.Context, dsn, schema string) (bool, error) {
	cfg, err := parseDSN(dsn, pgx.ParseConfig, func(c *pgx.ConnConfig) *pgconn.Config { return &c.Config })
	if err != nil {
		return false, err
	}
	if schema == "" {
		schema = DefaultSchema
	}
	prefix := "pgstore " + serverName(cfg)
	if err := checkSchemaName(schema); err != nil {
		return false, fmt.Errorf("%s: %w", prefix, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, connectError(err, cfg, dsn)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var found bool
	err = conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, "sessions"}.Sanitize()).Scan(&found)
	if err != nil {
		return false, redactErr(fmt.Errorf("%s: look for schema %q: %w", prefix, schema, err), cfg.Password)
	}
	return found, nil
}

// setParam sets the server setting name for every connection, replacing
// whatever the connection string set it to. The server takes setting names
// in any letter case and applies a connection's parameters in the order the
// driver sends them, which is no set order: a parameter spelled
// differently (SYNCHRONOUS_COMMIT=off) would otherwise win at random. A -c
// switch in the options parameter needs nothing: the server applies those
// first, then the parameters.
func setParam(params map[string]string, name, value string) {
	for k := range params {
		if strings.EqualFold(k, name) {
			delete(params, k)
		}
	}
	params[name] = value
}

// hasParam reports whether params sets name, in any letter case.
func hasParam(params map[string]string, name string) bool {
	for k := range params {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// serverName is host:port/database.
func serverName(c *pgx.ConnConfig) string {
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) + "/" + c.Database
}

// channelName is the NOTIFY channel of a schema: at most 63 bytes, as
// PostgreSQL truncates longer identifiers.
func channelName(schema string) string {
	c := "ctxstore." + schema
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(schema))
		c = "ctxstore." + hex.EncodeToString(sum[:16])
	}
	return c
}

// Location names the server and database (and the schema when it is not
// the default), never the password.
func (s *Store) Location() string {
	if s.schema == (pgx.Identifier{DefaultSchema}).Sanitize() {
		return s.server
	}
	return s.server + " schema " + s.schema
}

// Close ends every Watch of the Store (each channel is closed and its
// connection too) and closes the pool, waiting for operations in flight.
// Later calls fail with storage.ErrClosed, and so do writes still queued
// for a commit or waiting to try again after a lost connection.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.watches.Cancel()
	s.pool.Close()
	s.watches.Wait()
	return nil
}

// errorf wraps an error with the server and, if not empty, the session,
// and keeps the password out of it.
func (s *Store) errorf(session, format string, args ...any) error {
	prefix := "pgstore " + s.server
	if session != "" {
		prefix += fmt.Sprintf(": session %q", session)
	}
	err := fmt.Errorf(prefix+": "+format, args...)
	return redactErr(err, s.password)
}

// redactErr hides password in err's message, keeping err's chain for
// errors.Is and errors.As.
func redactErr(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redacted{err: err, password: password}
}

type redacted struct {
	err      error
	password string
}

func (r *redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.password, "xxxxx") }
func (r *redacted) Unwrap() error { return r.err }

// begin checks the store is open and ctx is live.
func (s *Store) begin(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore %s: %w", s.server, storage.ErrClosed)
	}
	return ctx.Err()
}

//go:embed migrations/*.sql
var migrations embed.FS

// prepare checks the schema's version and, when the schema is missing or
// older than this program, creates or migrates it (read-write only). A
// current schema costs one query and needs no privilege beyond reading its
// migrations table.
func (s *Store) prepare(ctx context.Context, schema string) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	latest := len(names)
	// A read: tried again when its connection is lost (a host starting
	// during a failover, or while its backends are being terminated).
	var have int
	err = s.read(ctx, func() (err error) {
		have, err = s.version(ctx, s.pool)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case have > latest:
		return s.errorf("", "schema %s is at version %d, newer than this program's %d: use a newer ctxstore", s.schema, have, latest)
	case have == latest:
		return nil
	case s.readOnly && have > 0:
		// A host may be migrating it right now (each migration commits on
		// its own): wait for that to end, then look again.
		if have, err = s.versionAfterMigration(ctx, schema); err != nil {
			return err
		}
		if have == latest {
			return nil
		}
		if have > latest {
			return s.errorf("", "schema %s is at version %d, newer than this program's %d: use a newer ctxstore", s.schema, have, latest)
		}
	}
	switch {
	case s.readOnly && have == 0:
		return s.errorf("", "no ctxstore tables in schema %s (check its name; a read-write open, by a role that may create in the database, creates them): %w", s.schema, noTablesError{})
	case s.readOnly:
		return s.errorf("", "schema %s is at version %d, this program needs %d (open it once read-write, as a role that may create in the schema, to migrate it): %w", s.schema, have, latest, ErrNoSchema)
	}
	if err := s.migrate(ctx, schema, names); err != nil {
		if isDenied(err) {
			return fmt.Errorf("%w\nrole %q may not create or migrate schema %s (at version %d, this program needs %d): open it once read-write as a role that may create in the schema (in the database, while the schema does not exist), such as the database's owner; then this role can use it (%w)", err, s.user, s.schema, have, latest, ErrReadOnly)
		}
		return err
	}
	return nil
}

// versionAfterMigration reads the schema's version once no host holds the
// migration lock, so that a read-only open never takes a schema some
// migrations into an upgrade for an old one.
func (s *Store) versionAfterMigration(ctx context.Context, schema string) (int, error) {
	var have int
	err := s.withMigrationLock(ctx, schema, true, func(conn *pgxpool.Conn) (err error) {
		have, err = s.version(ctx, conn)
		return err
	})
	return have, err
}

// withMigrationLock runs fn on a pooled connection holding schema's
// migration lock: exclusive for a migration, shared to wait for one to end.
// A cancelled ctx never leaves the lock held on the pooled connection.
func (s *Store) withMigrationLock(ctx context.Context, schema string, shared bool, fn func(*pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return connectError(s.errorf("", "connect: %w", err), s.connCfg, s.dsn)
	}
	defer conn.Release()
	lock, unlock := "pg_advisory_lock", "pg_advisory_unlock"
	if shared {
		lock, unlock = lock+"_shared", unlock+"_shared"
	}
	key := migrateLockKey(schema)
	if _, err := conn.Exec(ctx, "SELECT "+lock+"(hashtext($1))", key); err != nil {
		return s.errorf("", "schema %s: migration lock: %w", s.schema, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT "+unlock+"(hashtext($1))", key); err != nil {
			conn.Conn().Close(uctx)
		}
	}()
	return fn(conn)
}

// migrateLockKey names the advisory lock that migrations of schema hold.
func migrateLockKey(schema string) string { return "ctxstore migrate " + schema }

// querier is a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// version is the schema's migration version: 0 when the schema, or its
// migrations table, does not exist.
func (s *Store) version(ctx context.Context, q querier) (int, error) {
	var have int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.schema+".migrations").Scan(&have)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case "3F000", "42P01": // invalid_schema_name, undefined_table
			return 0, nil
		case "42501": // insufficient_privilege
			return 0, s.errorf("", "schema %s: role %q may not read it: %w (it needs USAGE on the schema and SELECT on its tables)", s.schema, s.user, err)
		}
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// No connection: nothing is known about the schema yet.
		return 0, connectError(err, s.connCfg, s.dsn)
	}
	if err != nil {
		return 0, s.errorf("", "schema %s: read its version: %w", s.schema, err)
	}
	return have, nil
}

// isDenied reports whether err is the server refusing a write: the role
// lacks the privilege (42501), or the server (a standby) or the login takes
// read-only transactions only (25006).
func isDenied(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pgErr.Code == "42501" || pgErr.Code == "25006")
}

// migrate creates the schema and applies the migrations (names, in order)
// it lacks, each in its own transaction, under an advisory lock so that
// several hosts starting together apply each exactly once.
func (s *Store) migrate(ctx context.Context, schema string, names []string) error {
	return s.withMigrationLock(ctx, schema, false, func(conn *pgxpool.Conn) error { return s.migrateLocked(ctx, conn, schema, names) })
}

// migrateLocked is migrate once conn holds the migration lock.
func (s *Store) migrateLocked(ctx context.Context, conn *pgxpool.Conn, schema string, names []string) error {
	// Another host may have migrated while this one waited for the lock:
	// a current schema needs no CREATE.
	have, err := s.version(ctx, conn)
	if err != nil {
		return err
	}
	if have > len(names) {
		return s.errorf("", "schema %s is at version %d, newer than this program's %d: use a newer ctxstore", s.schema, have, len(names))
	}
	if have < len(names) {
		// CREATE SCHEMA needs CREATE on the database even when the schema
		// exists: a role that owns an existing schema migrates it without.
		var exists bool
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists)
		if err == nil && !exists {
			_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema)
		}
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.schema+".migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
		}
		if err != nil {
			return s.errorf("", "migrate schema %s: %w", s.schema, err)
		}
	}
	for i, name := range names {
		version := i + 1
		if version <= have {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		sql := strings.ReplaceAll(string(body), "{{schema}}", s.schema)
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+s.schema+".migrations (version, name) VALUES ($1, $2)", version, path.Base(name))
			return err
		})
		if err != nil {
			return s.errorf("", "migrate schema %s to version %d (%s): %w", s.schema, version, path.Base(name), err)
		}
	}
	return nil
}

// isConnLoss reports whether err means the connection failed (or the
// server ended the session) rather than the server refusing the statement.
// A write that failed so before its COMMIT was rolled back by the server and
// can be tried again; one that failed so during its COMMIT has an unknown
// outcome.
func isConnLoss(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		// Class 57 "operator intervention" (pg_terminate_backend, shutdown)
		// and class 08 "connection exception", except 57014 query_canceled:
		// the server cancelled the statement (statement_timeout, or
		// pg_cancel_backend) and says so on a connection that still works;
		// the transaction is rolled back, and trying again would only wait
		// as long again. (When our own context ends, pgx stops reading and
		// closes the connection, sending a cancel request on the way whose
		// 57014 it never reads: the error is the context's, and callers
		// check the context first.)
		if pgErr.Code == "57014" {
			return false
		}
		return strings.HasPrefix(pgErr.Code, "57") || strings.HasPrefix(pgErr.Code, "08")
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "conn closed")
}

// The PostgreSQL store is an engine.
var (
	_ storage.Engine          = (*Store)(nil)
	_ storage.CounterSplitter = (*Store)(nil)
	_ storage.SnapshotReader  = (*Store)(nil)
)
