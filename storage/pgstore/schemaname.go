package pgstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxstore/ctxstore/storage"
)

// MaxSchemaLen is the longest schema name Open accepts, in bytes:
// PostgreSQL's identifier limit (NAMEDATALEN-1 in a standard build). The
// server cuts longer identifiers to that length without a word, so two
// long names sharing their first 63 bytes would be one schema, and each
// deployment would see and change the other's sessions.
const MaxSchemaLen = 63

// ErrSchemaName means Options.Schema (or SchemaExists' schema) cannot name
// a schema of its own: longer than MaxSchemaLen bytes, or holding a NUL
// byte. Nothing was created. It matches storage.ErrBadTarget.
var ErrSchemaName error = schemaNameError{}

// schemaNameError is ErrSchemaName: storage.ErrBadTarget in this engine's
// words.
type schemaNameError struct{}

func (schemaNameError) Error() string        { return "invalid schema name" }
func (schemaNameError) Is(target error) bool { return target == storage.ErrBadTarget }

// checkSchemaName refuses a schema name the server would not keep as it is.
func checkSchemaName(name string) error {
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: schema name %q holds a NUL byte", ErrSchemaName, name)
	}
	if len(name) <= MaxSchemaLen {
		return nil
	}
	// The server cuts at a character boundary.
	cut := MaxSchemaLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Errorf("%w: schema name %q is %d bytes, over PostgreSQL's limit of %d; the server would cut it to %q, "+
		"which every name starting so shares, mixing their sessions: pick a name of at most %d bytes",
		ErrSchemaName, name, len(name), MaxSchemaLen, name[:cut], MaxSchemaLen)
}
