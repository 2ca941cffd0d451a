// Package boltstore is ctxstore's durable log: one bbolt file holding many
// conversation sessions, each an append-only sequence of messages with a
// per-session seq that only grows, split into epochs by Clear, plus
// derived records (compaction decisions, summaries) kept apart from the
// messages. The file layout is described in layout.go.
//
// # Guarantees
//
//   - Durability: Append returns nil only after its records are on disk:
//     fdatasynced in the write-ahead log (below), or committed by bbolt,
//     which fdatasyncs the data pages and then the meta page. Options.NoSync
//     skips the syncs and is unsafe; it exists for bulk loads and benchmarks.
//     A NoSync process sharing a file with durable ones makes their
//     appends as weak as its own while both run (it marks the log synced
//     without syncing it).
//   - Atomicity: the records of one Append (or AppendIf) land together or
//     not at all (one checksummed log record, or one bbolt transaction);
//     the session's metadata moves with them, so Sessions and Session never
//     read message bodies.
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
// # The write-ahead log
//
// A bbolt commit costs two fsyncs, so a durable append that commits to bbolt
// costs two. Appends therefore go first to a log beside the file, PATH-wal:
// one checksummed record per Append, one fdatasync, after which the call
// returns. The log is applied to the bbolt file in batches, in one bbolt
// transaction that also records how far the log is applied (a checkpoint),
// and then emptied, as etcd applies its log to its bbolt backend. A
// checkpoint happens when the log passes 4 MiB or 65,536 messages, before
// every other kind of write (Clear, Purge, imports, an append of more than
// 1 MiB, which commit to bbolt in the same transaction; derived records of
// a session the file holds commit to bbolt without it), on Checkpoint, and on the Close of the last Store that has the file open
// (on Linux; elsewhere on every Close), so a file every process has closed
// holds every message by itself, and a process that finishes does not hold
// up the others still appending. A file Open creates starts its log at once.
//
// Readers see an append the moment it is durable: every operation takes the
// log's lock (shared to read, exclusive to write; the lock is held for
// microseconds, and the fsync runs after it is released, so the appends of
// several processes overlap their syncs, which the kernel merges: ext4
// commits every fdatasync that arrives during a journal commit in the next
// one), reads what the log gained since
// its last look, and reads bbolt and the log together; a read the log alone
// can answer does not open the bbolt file. The log's header says how far it
// is synced, and readers, in this process or another, see records only up
// to there, so nothing a reader was shown can vanish in a power cut.
// Conditional writes see every record written, synced or not, and return
// only after a sync that carries what they checked against.
//
// After a crash the log is replayed from the offset bbolt records as
// applied, so a checkpoint cut short never doubles a record. Bytes past the
// synced offset that are no valid record (a write cut short, or unsynced
// writes that reached the disk out of order before a power cut) were never
// acknowledged: they are ignored and cut off by the next writer. Bad bytes
// before it are damage to records that were acknowledged: ErrCorrupt naming
// the log and the offset, and the log is left as it is for salvage (one
// caveat: the synced offset itself reaches the disk with the next sync, so
// damage to the records of the very last sync before a power cut reads as
// a torn tail). If a sync of the log fails, the append fails with
// ErrOutcomeUnknown and the Store commits later writes to bbolt, which
// writes the log's records again with them, until one has succeeded. A log whose
// identity does not match the file at the path (a copy of the file renamed
// over it) has its messages appended to the file at the path, except those
// the file already holds.
//
// The log belongs with the file: a copy of the file alone, taken while the
// log holds records, lacks them. Copy or move both, close every process
// first, or use ctxstore compact-file (CompactFile puts the log's records in
// its copy; Salvage reads the log too). The log is LogPath(path): beside the
// file a symlink points to, so every name of the file shares it. See
// docs/operations.md.
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
// Waits for the bbolt file's lock and for the log's are woken as soon as it
// is free: one blocking flock per Store and kind of lock, on a descriptor of
// its own, which every call waiting meanwhile shares. Both are bounded by
// Options.LockTimeout (default 5 s) and the caller's context; after it the
// call fails with ErrLocked naming the file.
//
// # Many users in one process
//
// Each Open is a Store of its own: two Stores of one file in a process
// take turns at its locks as two processes would. A process holding many
// conversations open (a manager each) should share one Store instead, so
// that their writes share its group commit: OpenShared returns a handle on
// the one Store of the file in the process, found by the file's identity
// (so a symlink or another path to it shares too), and closes that Store
// with the last handle. persistent.Open, resume.Open and the ctxstore
// command open files this way. Handles of one file agree on LockTimeout
// and NoSync (ErrOptionsConflict otherwise); ReadOnly handles share a
// read-only Store of their own.
//
// # Group commit
//
// Writes (Append, Clear, PutDerived, ...) go through a queue. A lone writer
// commits at once; writers arriving during a commit share the next one: one
// log write and one fsync, or one transaction and its pair of fsyncs. A write rejected by its
// check (ErrNotEmpty, ErrNotFound) leaves the others in the transaction
// alone, and so does a caller's check (or UpdateDerived's fn) that panics:
// the panic is recovered where the check ran and raised again on its own
// caller's goroutine. A queued write whose context ends before a commit
// takes it leaves the queue and returns the context's error.
//
// # Files
//
// New files use 16 KiB pages, which keep the file near 1.3 bytes per byte
// of message JSON. The measurements behind these choices, the designs
// considered and the benchmark figures are in docs/performance.md.
package boltstore
