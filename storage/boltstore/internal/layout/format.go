package layout

import (
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
)

// NewerFormat is the error for something written in version n of a format of
// which this build reads up to have.
func NewerFormat(what string, n, have uint64) error {
	return fmt.Errorf("%w (%s version %d; this ctxstore reads up to version %d)", storage.ErrNewerFormat, what, n, have)
}
