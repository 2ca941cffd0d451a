package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
)

// mayNotWrite reports whether err is the engine refusing a write (on
// PostgreSQL: the role lacks the privilege, or the server or the login takes
// read-only transactions only).
func mayNotWrite(err error) bool {
	return errors.Is(err, storage.ErrReadOnly)
}

// reopenReadOnly closes st (when not nil), which could not write the
// search index because of why, and opens the database read-only, saying
// so on stderr: a read-only search uses the index when another host keeps
// it up to date, and otherwise reads the whole log, which takes seconds on
// a large one.
func (a *app) reopenReadOnly(ctx context.Context, st storage.Engine, why error) (storage.Engine, error) {
	if st != nil {
		st.Close()
	}
	ro, err := a.open(ctx, readOnly)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(a.stderr, "ctxstore search: note: %s may not be written here (%v), so search cannot keep its index up to date; "+
		"it searches the log itself when the index lags, which is slow on a large log. "+
		"Let this role write the schema's search_docs and search_marks tables (INSERT, UPDATE, DELETE), or search once as a role that may.\n",
		ro.Location(), why)
	return ro, nil
}
