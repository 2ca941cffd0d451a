// Package store is ctxstore's durable log: one bbolt file holding many
// conversation sessions, each an append-only sequence of messages with a
// per-session seq that only grows, split into epochs by Clear, plus
// derived records (compaction decisions, summaries) kept apart from the
// messages. The file layout is described in layout.go.
//
// # Guarantees
//
//   - Durability: Append returns nil only after bbolt's commit, which
//     fdatasyncs the data pages and then the meta page. Options.NoSync
//     skips both and is unsafe; it exists for bulk loads and benchmarks.
//   - Atomicity: the records of one Append (or AppendIf) land
//     together or not at all, with the session's metadata updated in the
//     same transaction, so Sessions and Session never read message bodies.
//   - Conditional writes: AppendIf, ReplaceEpoch and UpdateDerived check
//     the session's metadata inside their own write transaction, so a
//     check-then-write can never be overtaken by another writer, in this
//     process or another (an append that expects the epoch it last saw,
//     an importer claiming a source).
//   - Nothing is rewritten: Clear (and ReplaceEpoch) start a new epoch,
//     earlier epochs stay readable; only Purge and PurgeEpoch delete.
//   - Privacy: new files are 0600 and new directories 0700; the mode of
//     an existing file or directory is never changed.
//   - A damaged file never crashes the process: Open checks the meta,
//     root and freelist pages with plain reads before bbolt maps the file,
//     and every transaction runs with the runtime's panic-on-fault mode, so
//     garbage in a data page that bbolt reads through its mmap becomes an
//     error wrapping ErrCorrupt that names the file
//     (TestDamagedDataPagesNeverCrash).
//   - A kill at any moment, including while a new file is being created,
//     leaves a file that opens and holds every acknowledged append
//     (TestCrashKill).
//
// # Several processes, one file
//
// bbolt takes an exclusive flock for a read-write open and holds it until
// Close, so a process that kept the file open would lock every other
// process out. The store therefore opens the file only while operations
// are in flight: concurrent operations of one process share one open, and
// after the last one the file stays open for 2 ms, unless another process
// is waiting for it, so back-to-back operations do not reopen it. Every
// open checks the file under its lock before bbolt maps it.
//
// A file replaced at the path (a rescued copy renamed over it) is never
// written through a stale descriptor: the descriptor is checked to still be
// the file at the path after locking, before a lingering open is reused,
// and after every commit; a commit that landed in a file renamed away
// meanwhile is redone in the file now at the path before the write returns.
// This holds for replacements made under the file's exclusive lock, as
// ctxstore's own tools make them (compact-file); a copy taken and renamed
// over the path by another program while writers run can still miss their
// last commits: stop the writers first, or use compact-file.
//
// Lock waits are woken as soon as the lock is free (not polled) and bounded
// by Options.LockTimeout (default 5 s) and the caller's context; after it
// the call fails with ErrLocked naming the file.
//
// # Group commit
//
// Writes (Append, Clear, PutDerived, ...) go through a queue. A lone writer
// commits at once; writers arriving during a commit share the next one, a
// single transaction and a single pair of fsyncs. A write rejected by its
// check (ErrNotEmpty, ErrNotFound) leaves the others in the transaction
// alone.
//
// # Files
//
// New files use 16 KiB pages, which keep the file near 1.3 bytes per byte
// of message JSON. The measurements behind these choices, the designs
// considered and the benchmark figures are in docs/performance.md.
package store
