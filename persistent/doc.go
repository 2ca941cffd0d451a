// Package persistent is a ctxstore.Manager whose history lives in a
// storage engine, the durable counterpart of simple.Manager and of the
// reference's context-persistent module. Open keeps it in a store file
// (package storage/boltstore, the embedded default); OpenEngine runs it over any
// storage.Engine, such as a PostgreSQL database (package storage/pgstore)
// that managers on several hosts share.
//
// # The store is the source of truth
//
// Every AddMessage is a durable append. A session that already held
// messages when it was opened is "resumed": its history is the file's, and
// SetMessages — which a host calls with its own, filtered transcript — is
// ignored (it returns nil and emits context:resume with
// ignored_set_messages=true; Config.Logger, when given, logs it too). context:resume is emitted once at Open for a
// resumed session and again for each ignored SetMessages. A fresh session
// accepts SetMessages and stores the messages in one transaction
// (storage.Engine.AppendIf, on condition that the epoch is still empty): of several
// processes seeding one fresh session, exactly one wins and the others see
// its history.
//
// # Views without re-reading the history
//
// The manager keeps in memory only what a view can contain: the system and
// developer messages of the current epoch, the first and the last human
// message, and a tail of recent messages reaching back as far as the
// request's budget needs (internal/view's horizon). AddMessage pushes onto
// that window; GetMessagesForRequest first picks up what other processes
// appended (one metadata read when nothing changed), then runs the
// compaction engine. Opening a session of 100k messages reads the pinned
// messages and, on the first request, the tail — not the history.
//
// Sticky compaction decisions and summaries are saved as derived records
// (kind KindView, key per epoch and budget) whenever they change and loaded
// at Open, so a reopened session produces the same view as before the
// restart. A request returns before its decisions are stored (the next
// write and Close wait for them), unless they hold a summary the
// summarizer just wrote, which is stored first.
//
// # Memory files
//
// Config.MemoryFiles start every fresh session (and every epoch after
// Clear) as system messages "[Context from NAME]\n\n<content>", with
// metadata {"source":"memory-file","path":...,"version":n}. Until the first
// write they are pending: visible in views and GetMessages, stored together
// with the first message or SetMessages. With Config.WatchMemory an edited
// file is appended as a new version and views show only the newest version
// of each file; GetMessages keeps every version, as the log does.
//
// # Interrupted tails
//
// RepairInterruptedTail (used by package resume) answers the tool calls of
// an assistant message that never got their results with synthetic results
// in views, recorded as a derived record, never by rewriting the log.
//
// # Many conversations in one process
//
// A process may hold a manager per conversation, each opened with Open on
// the same file: they share one store underneath (boltstore.OpenShared), so
// their appends share its commits and cost what managers over one engine
// given to OpenEngine cost. The file is let go when the last of them
// closes.
//
// # Several processes
//
// Several processes, on one host over a file or on several over a shared
// database, may hold one session open. Each append is its own short
// transaction (the file engine opens the bbolt file per operation), and
// each view starts by catching up with the others' appends and Clears.
// Appends are conditional (AppendIf) on the epoch this manager last
// saw, checked inside the write transaction: an append that would land in
// an epoch another process has just started by Clear is refused, the
// manager catches up, and the append goes into the new epoch after its
// memory files. Checking costs nothing extra when nothing changed. The
// same kind of check keeps the other shared writes right: a new
// memory-file version is appended only if no other process stored one
// since (so several watchers of one file store each version once), view
// decisions and repair records only into the epoch they were computed for
// (never bringing a purged session back), and a session purged and
// recreated elsewhere is told apart by its new epoch (or, imported from an
// export, by its creation time).
// A process sees another's new memory-file versions at once (they are
// messages); the view decisions and repair records another process saves
// reach it when it reopens the session (or the epoch changes).
//
// docs/compaction.md describes the views (budget, strategies, guarantees);
// docs/engines.md the engines a manager runs over.
package persistent
