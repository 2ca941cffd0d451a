package storage

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxstore/ctxstore/internal/pgdsn"
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
	// MustExist refuses to create the store: a target without one fails
	// with an error matching ErrNoStore, as it does when ReadOnly.
	MustExist bool
	// Scheme picks the engine of a target that has no "scheme://" prefix
	// but is not a path, such as PostgreSQL's keyword/value connection
	// string "host=h dbname=d" (Scheme "postgres"). Empty: by the target,
	// or by the registered driver that claims it (Claimer).
	Scheme string
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
// scheme: a path opens the file engine (package storage/boltstore), a
// postgres:// URL the PostgreSQL one (package storage/pgstore), once the
// engine's package is imported. A scheme no imported engine registered fails with an error
// that says which are.
func Open(ctx context.Context, target string, opts OpenOptions) (Engine, error) {
	scheme := targetScheme(target, opts.Scheme)
	drivers.RLock()
	driver := drivers.m[scheme]
	drivers.RUnlock()
	if driver == nil {
		return nil, fmt.Errorf("storage: open %s: no engine for %q targets is registered (registered: %s)", redact(target), scheme, schemeList())
	}
	return driver.Open(ctx, target, opts)
}

// targetScheme is the scheme of target: scheme when given and target has
// no "scheme://" prefix; else Scheme(target), except that a target without
// a prefix that a registered Claimer claims is the Claimer's.
func targetScheme(target, scheme string) string {
	if scheme != "" && !strings.Contains(target, "://") {
		return strings.ToLower(scheme)
	}
	s := Scheme(target)
	if s != FileScheme {
		return s
	}
	drivers.RLock()
	defer drivers.RUnlock()
	for _, name := range slices.Sorted(maps.Keys(drivers.m)) {
		if c, ok := drivers.m[name].(Claimer); ok && name != FileScheme && c.Claims(target) {
			return name
		}
	}
	return s
}

// A Claimer is a Driver that also opens targets without a "scheme://"
// prefix that are not paths, such as PostgreSQL's keyword/value
// connection string "host=h dbname=d". Open and DriverOf give such a
// target to the driver that claims it rather than to the file engine.
type Claimer interface {
	// Claims reports whether target, which has no "scheme://" prefix,
	// is this driver's rather than a path.
	Claims(target string) bool
}

// A Redacter is a Driver whose targets may hold secrets, such as a
// password in a connection string. Redact and Shareable use it.
type Redacter interface {
	// Redact is target for messages: its secrets replaced by "xxxxx".
	Redact(target string) string
	// Shareable is target for a command line shown to people: its
	// secrets left out. note, when not empty, says what was left out
	// and how to give it otherwise.
	Shareable(target string) (s, note string)
}

// Redact is target for messages, with the secrets its driver (a Redacter)
// finds in it replaced by "xxxxx"; a URL's password without one.
func Redact(target string) string {
	if r, ok := driverOf(target).(Redacter); ok {
		return r.Redact(target)
	}
	return redact(target)
}

// Shareable is target for a command line shown to people, without the
// secrets its driver (a Redacter) finds in it; note says what was left
// out ("" when nothing was, or the driver is not a Redacter).
func Shareable(target string) (s, note string) {
	if r, ok := driverOf(target).(Redacter); ok {
		return r.Shareable(target)
	}
	return target, ""
}

// driverOf is the driver registered for target, or nil.
func driverOf(target string) Driver {
	scheme := targetScheme(target, "")
	drivers.RLock()
	defer drivers.RUnlock()
	return drivers.m[scheme]
}

// schemeList is Schemes for messages, with how to register PostgreSQL's.
func schemeList() string {
	return strings.Join(Schemes(), ", ") + "; import the engine's package, for PostgreSQL github.com/ctxstore/ctxstore/storage/pgstore"
}

// redact is target for messages: a URL's password (in its user
// information or a password= parameter) replaced by "xxxxx", whatever
// characters it holds.
func redact(target string) string { return pgdsn.RedactURL(target) }
