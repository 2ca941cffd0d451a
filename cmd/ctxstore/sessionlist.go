package main

import (
	"bufio"

	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// noTablesYet reports whether err, from opening the database read-only,
// only says that the PostgreSQL schema holds no ctxstore tables yet: a
// fresh database, which has no sessions (ls and stats say so and succeed).
// A schema whose tables are there but older than this program's is not
// empty, and stays an error. where names the database for the message.
func (a *app) noTablesYet(err error) (where string, empty bool) {
	if !errors.Is(err, storage.ErrNoSchema) || !errors.Is(err, storage.ErrNoStore) {
		return "", false
	}
	db, derr := a.dbPath()
	if derr != nil {
		return "", false
	}
	return fmt.Sprintf("%s (its schema has no ctxstore tables yet; add, import or demo with this --db create them)", redactURL(db)), true
}

// printNames is ls --names: each session's name on a line of its own, as
// stored (escaped only on a terminal); a name holding a line break cannot
// be one line and is left out.
func (a *app) printNames(sessions iter.Seq2[persistent.Listed, error]) error {
	w := bufio.NewWriter(a.stdout)
	for s, err := range sessions {
		if err != nil {
			w.Flush()
			return err
		}
		name := s.Name
		if strings.ContainsAny(name, "\r\n") {
			continue
		}
		if a.stdoutIsTerminal() {
			name = termSafe(name, false)
		}
		fmt.Fprintln(w, name)
	}
	return w.Flush()
}
