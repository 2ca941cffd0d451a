package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Driver opens the engines of one kind: a file engine opens a path, a
// server engine a URL. Engines register their driver with Register, as
// database/sql drivers do, so that Open can pick one by the target's scheme.
type Driver interface {
	// Open opens the engine target names. target is what was given to
	// Open, the scheme included.
	Open(ctx context.Context, target string, opts OpenOptions) (Engine, error)
}

// DriverFunc adapts a function to a Driver.
type DriverFunc func(ctx context.Context, target string, opts OpenOptions) (Engine, error)

// Open calls f.
func (f DriverFunc) Open(ctx context.Context, target string, opts OpenOptions) (Engine, error) {
	return f(ctx, target, opts)
}

// OpenOptions are the options every engine understands, or ignores where
// they do not apply to it.
type OpenOptions struct {
	// ReadOnly opens the engine for reading: writes fail, and nothing is
	// created or upgraded.
	ReadOnly bool
	// LockTimeout bounds a file engine's wait for another process's lock
	// (0: the engine's default).
	LockTimeout time.Duration
	// NoSync skips a file engine's fsyncs: faster, and a crash of the
	// machine may lose what was written. For tests and bulk loads.
	NoSync bool
}

// FileScheme is the scheme of a target that is a path (it has no
// "scheme://" prefix). The file engine registers it.
const FileScheme = "file"

// drivers is the registry Register fills and Open reads: written by the
// engines' init functions, read afterwards.
var drivers = struct {
	sync.RWMutex
	m map[string]Driver
}{m: map[string]Driver{}}

// Register makes driver open the targets of scheme ("file" for paths,
// "postgres" for postgres:// URLs). An engine package calls it from its
// init function, so that importing the package, even blank, makes its
// engine available to Open. It panics if scheme is registered twice or
// driver is nil, as database/sql.Register does: both are programming
// errors found at start-up.
func Register(scheme string, driver Driver) {
	scheme = strings.ToLower(scheme)
	drivers.Lock()
	defer drivers.Unlock()
	if driver == nil {
		panic("storage: Register driver is nil")
	}
	if _, dup := drivers.m[scheme]; dup {
		panic("storage: Register called twice for scheme " + scheme)
	}
	drivers.m[scheme] = driver
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	drivers.RLock()
	defer drivers.RUnlock()
	out := make([]string, 0, len(drivers.m))
	for s := range drivers.m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Scheme is the scheme of target: the lower-cased prefix before "://"
// for a URL, FileScheme for a path.
func Scheme(target string) string {
	i := strings.Index(target, "://")
	if i <= 0 || !validScheme(target[:i]) {
		return FileScheme
	}
	return strings.ToLower(target[:i])
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.').
func validScheme(s string) bool {
	for i, c := range s {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// Open opens the engine target names, with the driver registered for its
// scheme: a path opens the file engine (package store), a postgres:// URL
// the PostgreSQL one (package storage/pgstore), once the engine's package
// is imported. A scheme no imported engine registered fails with an error
// that says which are.
func Open(ctx context.Context, target string, opts OpenOptions) (Engine, error) {
	scheme := Scheme(target)
	drivers.RLock()
	driver := drivers.m[scheme]
	drivers.RUnlock()
	if driver == nil {
		return nil, fmt.Errorf("storage: open %s: no engine for %q targets is registered (registered: %s; import the engine's package, for PostgreSQL github.com/ctxstore/ctxstore/storage/pgstore)",
			redact(target), scheme, strings.Join(Schemes(), ", "))
	}
	return driver.Open(ctx, target, opts)
}

// redact is target for messages: the password of a URL's user info
// replaced by "xxxxx".
func redact(target string) string {
	i := strings.Index(target, "://")
	if i < 0 {
		return target
	}
	rest := target[i+3:]
	at := strings.IndexByte(rest, '@')
	if slash := strings.IndexByte(rest, '/'); at < 0 || slash >= 0 && slash < at {
		return target
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 {
		return target
	}
	return target[:i+3] + rest[:colon+1] + "xxxxx" + rest[at:]
}
