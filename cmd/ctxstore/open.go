package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/pgstore"
	"github.com/ctxstore/ctxstore/store"
)

// openMode says whether a command may create or change the database.
type openMode int

const (
	readOnly      openMode = iota // the database must exist and is never written
	readWrite                     // the file (and its directory), or the schema, is created if missing
	writeExisting                 // written, but it must exist: a change to a session creates no database
)

// serverOpenTimeout bounds connecting to a PostgreSQL server and bringing
// its schema up to date, so a server that does not answer fails the
// command instead of hanging it.
const serverOpenTimeout = 30 * time.Second

// isServer reports whether db names a PostgreSQL database (a postgres:// or
// postgresql:// URL, or a keyword/value connection string such as
// "host=h dbname=d") rather than a bbolt file.
func isServer(db string) bool { return pgdsn.Is(db) }

// open opens the database for a command: the bbolt file, or the PostgreSQL
// database a postgres:// URL names. A read command opens it read-only (a
// PostgreSQL role that may only SELECT is enough); it and a command that
// changes a session fail on a missing file or schema with a message saying
// how to create one, instead of leaving an empty database behind.
func (a *app) open(ctx context.Context, mode openMode) (storage.Engine, error) {
	path, err := a.dbPath()
	if err != nil {
		return nil, err
	}
	if isServer(path) {
		return openServer(ctx, path, mode)
	}
	if mode != readWrite {
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s (use --db FILE or $CTXSTORE_DB to pick another); these create one:\n  %s\n  %s\n  ctxstore demo --db %s", path, a.cmdline("add SESSION < MESSAGES"), a.cmdline("import FILE"), shellQuote(path))
		}
		if err == nil && fi.Size() == 0 {
			// bbolt would initialise it, which a read-only open cannot.
			return nil, fmt.Errorf("%s is empty (0 bytes): it holds no sessions yet; the first write makes it a store:\n  %s\n  %s", path, a.cmdline("add SESSION < MESSAGES"), a.cmdline("import FILE"))
		}
	}
	st, err := store.OpenShared(path, store.Options{ReadOnly: mode == readOnly, LockTimeout: a.lockTimeout})
	if err != nil {
		return nil, explain(path, "", err)
	}
	return st, nil
}

// openServer opens the PostgreSQL database dsn names. A "schema" query
// parameter picks the schema holding ctxstore's tables (default
// "ctxstore"), so several deployments can share one database; the other
// parameters go to the driver as they are. A write creates (or migrates)
// the schema on first use; a read opens it read-only (pgstore's
// Options.ReadOnly), so it never writes and a role with nothing but SELECT
// can run it. A read, or a change to a session, of a schema without
// ctxstore's tables fails, as it does for a missing file, instead of
// creating one.
func openServer(ctx context.Context, dsn string, mode openMode) (*pgstore.Store, error) {
	conn, schema, err := splitSchema(dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, serverOpenTimeout)
	defer cancel()
	if mode == writeExisting {
		found, err := pgstore.SchemaExists(ctx, conn, schema)
		if err != nil {
			return nil, serverError(err, dsn)
		}
		if !found {
			return nil, fmt.Errorf("no ctxstore tables in schema %q of %s (check the schema= parameter of --db or $CTXSTORE_DB; 'add', 'import' or 'demo', given the same --db, create them)", schema, redactURL(dsn))
		}
	}
	st, err := pgstore.Open(ctx, conn, pgstore.Options{Schema: schema, ReadOnly: mode == readOnly})
	if errors.Is(err, pgstore.ErrNoSchema) {
		return nil, fmt.Errorf("%w\n(check the schema= parameter of --db or $CTXSTORE_DB: %s; 'add', 'import' or 'demo', given the same --db, create or update the tables)", err, redactURL(dsn))
	}
	if err != nil {
		return nil, serverError(err, dsn)
	}
	return st, nil
}

// serverError explains err, which failed to open the PostgreSQL database
// db names, by pgstore's typed errors. A connection string that does not
// parse, or a schema name the server would cut short, is a usage error
// saying what is wrong. A server that cannot be reached, or does not
// answer, is named (host:port) once, with what to check, instead of the
// driver's line per attempt; one that refuses the login, or has no such
// database, says so. Anything else keeps its message. Each says where the
// connection string came from, never with its password: pgstore's errors
// never hold it, and the string is shown redacted.
func serverError(err error, db string) error {
	form := "connection string"
	if pgdsn.IsURL(db) {
		form = "URL"
	}
	given := "the " + form + " given with --db or $CTXSTORE_DB: " + redactURL(db)
	if errors.Is(err, pgstore.ErrSchemaName) {
		return usagef("--db: the schema= parameter of %s: %v", redactURL(db), err)
	}
	ce, ok := errors.AsType[*pgstore.ConnectError](err)
	if !ok {
		return fmt.Errorf("%w\n(the database is %s; check that the server runs and accepts the connection)", err, given)
	}
	addr := net.JoinHostPort(ce.Host, strconv.Itoa(int(ce.Port)))
	check := "check that PostgreSQL runs there, and the host and port in " + given
	switch {
	case errors.Is(err, pgstore.ErrBadDSN):
		return usagef("--db: %s is not a valid PostgreSQL %s: %s (its parameters are libpq's: https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS)",
			redactURL(db), form, ce.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from the PostgreSQL server at %s in time (within connect_timeout, or %v)\n(%s)", addr, serverOpenTimeout, check)
	case errors.Is(err, pgstore.ErrUnreachable):
		return fmt.Errorf("cannot reach the PostgreSQL server at %s: %s\n(%s)", addr, ce.Reason, check)
	case errors.Is(err, pgstore.ErrAuth):
		return fmt.Errorf("the PostgreSQL server at %s refused the login: %s\n(check the user and password in %s; in a URL, a password holding / # ? @ : %% or spaces must be percent-encoded)", addr, ce.Reason, given)
	case errors.Is(err, pgstore.ErrNoDatabase):
		return fmt.Errorf("the PostgreSQL server at %s has no database %q: %s\n(check the database in %s)", addr, ce.Database, ce.Reason, given)
	}
	return fmt.Errorf("the PostgreSQL server at %s refused the connection: %s\n(check the user, password and database in %s)", addr, ce.Reason, given)
}

// splitSchema takes the "schema" parameter out of a connection string
// (a URL's query parameter, or a schema= pair), which the driver would
// otherwise send the server as a setting; without one the schema is
// pgstore.DefaultSchema. It decodes nothing but the parameters, so a
// password the URL does not encode is left for pgstore to refuse, never
// quoted in an error.
func splitSchema(dsn string) (conn, schema string, err error) {
	conn, schema, found, err := pgdsn.Cut(dsn, "schema")
	if err != nil {
		return "", "", usagef("--db: the parameters of %s are not validly percent-encoded: %v", redactURL(dsn), err)
	}
	if !found {
		return dsn, pgstore.DefaultSchema, nil
	}
	if schema == "" {
		return "", "", usagef("--db: the schema= parameter of %s is empty: name a schema, or leave the parameter out for %q", redactURL(dsn), pgstore.DefaultSchema)
	}
	return conn, schema, nil
}

// redactURL is db for messages: a PostgreSQL connection string with its
// password (after the user name, or a password= parameter) replaced by
// "xxxxx", whatever characters it holds; a file path as it is.
func redactURL(db string) string {
	if !isServer(db) {
		return db
	}
	return pgdsn.Redact(db)
}

// suggestedURL is db for a command suggested to the user: a PostgreSQL
// connection string without its password (hidden reports one was left
// out), which PGPASSWORD or ~/.pgpass supplies when the command is pasted;
// a file path as it is.
func suggestedURL(db string) (s string, hidden bool) {
	if !isServer(db) {
		return db, false
	}
	s, _, hidden, err := pgdsn.Cut(db, "password")
	if err != nil {
		return redactURL(db), true
	}
	if !pgdsn.IsURL(s) {
		return s, hidden
	}
	u, err := url.Parse(s)
	if err != nil {
		return redactURL(db), strings.Contains(db, "@")
	}
	if _, ok := u.User.Password(); ok {
		u.User, hidden = url.User(u.User.Username()), true
		s = u.String()
	}
	return s, hidden
}

// fileOnly refuses a command that works on the bbolt file itself when the
// database is a PostgreSQL server.
func (a *app) fileOnly(what, instead string) error {
	path, err := a.dbPath()
	if err != nil {
		return err
	}
	if isServer(path) {
		return usagef("%s works on a bbolt file; PostgreSQL (%s) %s", what, redactURL(path), instead)
	}
	return nil
}

// explainIn is explain for an error from st. A file's errors are explained
// as explain does; a server's already name the server and the session, and
// a missing session is told the same way as in a file.
func explainIn(st storage.Engine, session string, err error) error {
	if f, ok := st.(*store.Shared); ok {
		return explain(f.Path(), session, err)
	}
	return explainServer(st.Location(), session, err)
}

// explainServer is explain for a PostgreSQL database, named by where
// (never with its password).
func explainServer(where, session string, err error) error {
	if err != nil && session != "" && errors.Is(err, storage.ErrNotFound) {
		return withSentinel(fmt.Errorf("session %q not found in %s (see: ctxstore ls, with the same --db)", session, where), storage.ErrNotFound)
	}
	return err
}

// explain turns a store error into a message that names the file or session
// and says what to do about it. Errors it does not recognise pass through
// with the file named.
func explain(path, session string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("%s is held by another process, which did not let go within the lock timeout; "+
			"retry when that process is idle, stop it, or wait longer with --lock-timeout: %w", path, err)
	case errors.Is(err, store.ErrCorrupt):
		return fmt.Errorf("%s is damaged: %w\nrecover every readable message into a new file with: ctxstore --db %s doctor --salvage OUT.db",
			path, err, shellQuote(path))
	case errors.Is(err, store.ErrNotFound) && session != "":
		return withSentinel(fmt.Errorf("session %q not found in %s (see: ctxstore --db %s ls)", session, path, shellQuote(path)), store.ErrNotFound)
	case errors.Is(err, store.ErrNewerFormat):
		return fmt.Errorf("%w; this is ctxstore %s, and nothing was changed", err, buildVersion())
	case errors.Is(err, store.ErrMoved):
		return fmt.Errorf("%s changed under this command: %w", path, err)
	case errors.Is(err, fs.ErrPermission):
		return permissionError(path, err)
	}
	return err
}

// cmdline is a ctxstore command line to suggest to the user: the --db they
// gave comes first, so a pasted suggestion acts on the same file. A
// PostgreSQL URL's password is left out, and a note after the command says
// so. The arguments are formatted as by fmt.Sprintf; quote names with
// shellQuote. A nil a suggests the command without --db. Messages show it
// as it is, never within quotes: it quotes what the shell needs.
func (a *app) cmdline(format string, args ...any) string {
	db, note := "", ""
	if a != nil && a.db != "" {
		u, hidden := suggestedURL(a.db)
		db = "--db " + shellQuote(u) + " "
		if hidden {
			note = " (password left out: set PGPASSWORD or use ~/.pgpass)"
		}
	}
	return "ctxstore " + db + fmt.Sprintf(format, args...) + note
}

// shellQuote quotes s for a POSIX shell when it needs it, so suggested
// commands can be pasted as they are.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' || r == '.' || r == '_' || r == '-' || r == '+' || r == ':' || r == '=' || r == ',' || r == '@') {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, `'\''`...)
		} else {
			out = append(out, s[i])
		}
	}
	return string(append(out, '\''))
}
