// Package sessionimport works out what an exported session is in the file:
// each entry, checked as it streams in, becomes the envelope the file keeps
// ([Session.Add]), and the session's metadata (epochs, counts, title) is
// worked out from the export's info and the entries so far
// ([Session.Meta]), the same way as every engine does (storage.ImportCheck).
// Writing them is the engine's.
package sessionimport

import (
	"fmt"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
)

// Session accumulates what the session's metadata needs from the entries.
type Session struct {
	// Name is the session's; Created its creation time (now, if the
	// export has none), in Unix nanoseconds.
	Name    string
	Created int64
	info    storage.SessionInfo
	// chk checks the entries and keeps their epochs.
	chk       *storage.ImportCheck
	lastEpoch uint64
	total     int
	title     string
	// scratch is the latest epoch's counts so far, kept by the code
	// Append uses.
	scratch layout.Meta
}

// New checks info before anything is written (each entry is checked as it
// comes, by Add).
func New(info storage.SessionInfo) (*Session, error) {
	name := info.Name
	if err := storage.CheckSession(name); err != nil {
		return nil, err
	}
	chk, err := storage.NewImportCheck(info)
	if err != nil {
		return nil, fmt.Errorf("store: import session %q: %w", name, err)
	}
	created := info.Created.UnixNano()
	if info.Created.IsZero() {
		created = time.Now().UnixNano()
	}
	return &Session{Name: name, info: info, Created: created, chk: chk, scratch: layout.NewMeta(0)}, nil
}

// Add checks e and accounts for it, and returns its envelope.
func (im *Session) Add(e storage.Entry) (layout.Envelope, error) {
	if err := im.chk.Entry(e); err != nil {
		return layout.Envelope{}, fmt.Errorf("store: import session %q: %w", im.Name, err)
	}
	msg, err := ctxstore.ParseMessage(e.Raw)
	if err != nil {
		return layout.Envelope{}, fmt.Errorf("store: import session %q seq %d: %w", im.Name, e.Seq, err)
	}
	env := layout.Envelope{Seq: e.Seq, Epoch: e.Epoch, Time: e.Time.UnixNano(), Role: msg.Role(), Tokens: e.Tokens, Counter: e.Counter,
		CallIDs: msg.CallIDs(), ResultIDs: msg.ResultIDs(), Raw: msg.Bytes(), Session: im.Name}
	if e.Time.IsZero() {
		env.Time = 0
	}
	if e.Epoch != im.lastEpoch {
		im.scratch = layout.NewMeta(0)
	}
	im.total++
	im.lastEpoch = e.Epoch
	im.scratch.Add(&env, msg)
	if im.title == "" && msg.Role() == ctxstore.RoleUser && !msg.IsToolResult() {
		im.title = storage.Title(msg.Text())
	}
	return env, nil
}
