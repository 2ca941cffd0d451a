package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/ctxstore/ctxstore/store"
)

// openMode says whether a command may create or change the database.
type openMode int

const (
	readOnly  openMode = iota // the file must exist and is never written
	readWrite                 // the file (and its directory) is created if missing
)

// open opens the database for a command. A read command on a missing file
// fails with a message saying how to create one, instead of leaving an
// empty database behind.
func (a *app) open(mode openMode) (*store.Store, error) {
	path, err := a.dbPath()
	if err != nil {
		return nil, err
	}
	if mode == readOnly {
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s (use --db FILE or $CTXSTORE_DB to pick another; 'ctxstore add', 'ctxstore import' or 'ctxstore demo --db %s' create one)", path, path)
		}
		if err == nil && fi.Size() == 0 {
			// bbolt would initialise it, which a read-only open cannot.
			return nil, fmt.Errorf("%s is empty (0 bytes): it holds no sessions yet; the first write ('ctxstore add', 'ctxstore import') makes it a store", path)
		}
	}
	st, err := store.Open(path, store.Options{ReadOnly: mode == readOnly, LockTimeout: a.lockTimeout})
	if err != nil {
		return nil, explain(path, "", err)
	}
	return st, nil
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
		return fmt.Errorf("session %q not found in %s (see: ctxstore --db %s ls)", session, path, shellQuote(path))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied (ctxstore files are private to their owner, mode 0600): %w", path, err)
	}
	return err
}

// cmdline is a ctxstore command line to suggest to the user: the --db they
// gave comes first, so a pasted suggestion acts on the same file. The
// arguments are formatted as by fmt.Sprintf; quote names with shellQuote.
func (a *app) cmdline(format string, args ...any) string {
	db := ""
	if a.db != "" {
		db = "--db " + shellQuote(a.db) + " "
	}
	return "ctxstore " + db + fmt.Sprintf(format, args...)
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
