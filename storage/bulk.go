package storage

import (
	"context"
	"fmt"
	"iter"
)

// SessionImport is one session of a bulk import: what ImportSession takes,
// held in memory, and the session's derived records.
type SessionImport struct {
	Info    SessionInfo
	Entries []Entry
	Derived []Derived
}

// BulkImporter is implemented by engines that can import many sessions in
// one durable commit. Importing thousands of small sessions one
// ImportSession at a time costs a durable commit (an fsync, a WAL flush)
// per session; a batch costs one.
type BulkImporter interface {
	// ImportSessions imports every session of batch as ImportSession
	// would, with its derived records, in one transaction: when it returns
	// nil all of them are durable; on error none is. Each session is
	// checked as ImportSession checks it, and a name given twice in batch
	// fails with ErrInvalidImport; the error names the first session
	// refused. The whole batch is held in memory: callers bound its size
	// (a few thousand small sessions, a few MiB). An engine that cannot
	// take the batch in one transaction as configured fails with an error
	// matching errors.ErrUnsupported, storing nothing: import the sessions
	// one at a time.
	ImportSessions(ctx context.Context, batch []SessionImport) error
}

// EntrySeq yields si's entries, as ImportSession takes them.
func (si *SessionImport) EntrySeq() iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for _, e := range si.Entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// CheckBatch checks what every engine refuses in a batch before looking at
// its sessions one by one: a session name given twice, and derived records
// without a kind or a key. Its error matches ErrInvalidImport.
func CheckBatch(batch []SessionImport) error {
	seen := make(map[string]struct{}, len(batch))
	for i := range batch {
		name := batch[i].Info.Name
		if err := CheckSession(name); err != nil {
			return err
		}
		if _, dup := seen[name]; dup {
			return fmt.Errorf("import session %q: %w: the batch names it twice", name, ErrInvalidImport)
		}
		seen[name] = struct{}{}
		for _, d := range batch[i].Derived {
			if d.Kind == "" || d.Key == "" {
				return fmt.Errorf("import session %q: %w: a derived record needs a kind and a key (kind %q, key %q)", name, ErrInvalidImport, d.Kind, d.Key)
			}
		}
	}
	return nil
}
