package tokens

import (
	"testing"

	"github.com/ctxstore/ctxstore"
)

// What the external test package's benchmarks share with the package's
// own.

// TypicalMessages is typicalMessages.
func TypicalMessages(b *testing.B) []ctxstore.Message { return typicalMessages(b) }

// Counters is counters.
func Counters() []*Counter { return counters() }

// Short is short.
func Short(c *Counter) string { return short(c) }
