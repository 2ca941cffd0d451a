package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ctxstore/ctxstore/storage"
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

// open opens the database for a command through the engine registered for
// it: a file, or the PostgreSQL database a connection string names. A read
// command opens it read-only (a PostgreSQL role that may only SELECT is
// enough); it and a command that changes a session fail on a missing
// database (storage.ErrNoStore) with a message saying how to create one,
// instead of leaving an empty database behind. Connecting (and bringing a
// schema up to date) is bounded by serverOpenTimeout.
func (a *app) open(ctx context.Context, mode openMode) (storage.Engine, error) {
	target, err := a.dbPath()
	if err != nil {
		return nil, err
	}
	return a.openAt(ctx, target, mode)
}

// openAt is open for the database at target rather than --db's.
func (a *app) openAt(ctx context.Context, target string, mode openMode) (storage.Engine, error) {
	octx, cancel := context.WithTimeout(ctx, serverOpenTimeout)
	defer cancel()
	st, err := storage.Open(octx, target, storage.OpenOptions{
		ReadOnly: mode == readOnly, MustExist: mode == writeExisting, LockTimeout: a.lockTimeout,
	})
	if err != nil {
		return nil, a.openError(target, err)
	}
	if f, ok := st.(storage.FileEngine); ok {
		a.file = f
	}
	return st, nil
}

// openError explains err, which failed to open target: a database that is
// not there says how to create one; a server that cannot be reached or
// refuses the login says so (serverError); the rest as explain does.
func (a *app) openError(target string, err error) error {
	if _, connect := errors.AsType[*storage.ConnectError](err); connect {
		return serverError(err, target)
	}
	switch {
	case errors.Is(err, storage.ErrBadTarget):
		return usagef("--db: %v", err)
	case errors.Is(err, storage.ErrNoStore):
		db, _ := storage.Shareable(target)
		return fmt.Errorf("%w\n(use --db or $CTXSTORE_DB to pick another); these create it:\n  %s\n  %s\n  ctxstore demo --db %s",
			err, a.cmdline("add SESSION < MESSAGES"), a.cmdline("import FILE"), shellQuote(db))
	}
	return explain(redactURL(target), "", err)
}

// serverError explains err, which failed to open the server database db
// names, by the engine's typed errors (storage.ConnectError). A
// connection string that does not parse is a usage error saying what is
// wrong, and where the engine documents its form. A server that cannot be
// reached, or does not answer, is named (host:port) once, with what to
// check, instead of the driver's line per attempt; one that refuses the
// login, or has no such database, says so. Anything else keeps its
// message. Each says where the connection string came from, never with its
// password: the engine's errors never hold it, and the string is shown
// redacted. What runs at the server is named as the engine names it
// (ConnectError.Product), or "the server".
func serverError(err error, db string) error {
	form := "connection string"
	if storage.Scheme(db) != storage.FileScheme {
		form = "URL"
	}
	given := "the " + form + " given with --db or $CTXSTORE_DB: " + redactURL(db)
	ce, ok := errors.AsType[*storage.ConnectError](err)
	if !ok {
		return fmt.Errorf("%w\n(the database is %s; check that the server runs and accepts the connection)", err, given)
	}
	addr := net.JoinHostPort(ce.Host, strconv.Itoa(int(ce.Port)))
	product, server := "the server software", "the server"
	if ce.Product != "" {
		product, server = ce.Product, "the "+ce.Product+" server"
	}
	check := "check that " + product + " runs there, and the host and port in " + given
	switch {
	case errors.Is(err, storage.ErrBadDSN):
		help := ""
		if ce.DSNHelp != "" {
			help = " (" + ce.DSNHelp + ")"
		}
		return usagef("--db: %s is not a valid %s: %s%s", redactURL(db), strings.TrimSpace(ce.Product+" "+form), ce.Reason, help)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from %s at %s within %v: %s\n(%s)", server, addr, serverOpenTimeout, ce.Reason, check)
	case errors.Is(err, storage.ErrUnreachable):
		return fmt.Errorf("cannot reach %s at %s: %s\n(%s)", server, addr, ce.Reason, check)
	case errors.Is(err, storage.ErrAuth):
		return fmt.Errorf("%s at %s refused the login: %s\n(check the user and password in %s; in a URL, a password holding / # ? @ : %% or spaces must be percent-encoded)", server, addr, ce.Reason, given)
	case errors.Is(err, storage.ErrNoDatabase):
		return fmt.Errorf("%s at %s has no database %q: %s\n(check the database in %s)", server, addr, ce.Database, ce.Reason, given)
	}
	return fmt.Errorf("%s at %s refused the connection: %s\n(check the user, password and database in %s)", server, addr, ce.Reason, given)
}

// redactURL is db for messages: a connection string with its password
// replaced by "xxxxx", whatever characters it holds (the engine's driver
// finds it); a file path as it is.
func redactURL(db string) string { return storage.Redact(db) }

// supported refuses a command the database's engine cannot run: its
// driver lacks the optional interface T (storage.Shrinker,
// storage.Salvager…). The message names what the engine does instead.
func supported[T any](a *app, what, instead string) error {
	target, err := a.dbPath()
	if err != nil {
		return err
	}
	d, err := storage.DriverOf(target, "")
	if err != nil {
		return err
	}
	if _, ok := d.(T); !ok {
		return usagef("%s works on a bbolt file; PostgreSQL (%s) %s", what, redactURL(target), instead)
	}
	return nil
}

// explainIn is explain for an error from st. A file's errors are explained
// as explain does; a server's already name the server and the session, and
// a missing session is told the same way as in a file.
func explainIn(st storage.Engine, session string, err error) error {
	if f, ok := st.(storage.FileEngine); ok {
		return explain(f.Path(), session, err)
	}
	return explainServer(st.Location(), session, err)
}

// explainSession is explainIn for an error that may be about one session
// (a *storage.SessionError names it).
func explainSession(st storage.Engine, err error) error {
	session := ""
	if se, ok := errors.AsType[*storage.SessionError](err); ok {
		session = se.Session
	}
	return explainIn(st, session, err)
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
	case errors.Is(err, storage.ErrLocked):
		return fmt.Errorf("%s is held by another process, which did not let go within the lock timeout; "+
			"retry when that process is idle, stop it, or wait longer with --lock-timeout: %w", path, err)
	case errors.Is(err, storage.ErrCorrupt):
		return fmt.Errorf("%s is damaged: %w\nrecover every readable message into a new file with: ctxstore --db %s doctor --salvage OUT.db",
			path, err, shellQuote(path))
	case errors.Is(err, storage.ErrNotFound) && session != "":
		return withSentinel(fmt.Errorf("session %q not found in %s (see: ctxstore --db %s ls)", session, path, shellQuote(path)), storage.ErrNotFound)
	case errors.Is(err, storage.ErrNewerFormat):
		return fmt.Errorf("%w; this is ctxstore %s, and nothing was changed", err, buildVersion())
	case errors.Is(err, storage.ErrNeedsUpgrade):
		return fmt.Errorf("%w\nupgrade it once with: ctxstore --db %s shrink (any command that writes to it upgrades it too; ctxstore builds from before the upgrade cannot open it afterwards)",
			err, shellQuote(path))
	case errors.Is(err, storage.ErrMoved):
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
		u, left := storage.Shareable(a.db)
		db = "--db " + shellQuote(u) + " "
		if left != "" {
			note = " (" + left + ")"
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
