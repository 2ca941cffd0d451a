// Package boltstore is ctxstore's embedded engine: one bbolt file holding
// many conversation sessions, each an append-only sequence of messages
// with a per-session seq that only grows, split into epochs by Clear, plus
// derived records (view decisions, summaries) kept apart from the
// messages. It implements [storage.Engine] and registers itself for paths
// and file:// URLs, so [storage.Open] (and persistent.Open) reach it by
// naming a file.
//
// An append returns once it is on disk: it is written to a write-ahead log
// beside the file (LogPath) and synced once, and the log is applied to the
// bbolt file many appends at a time. Readers see the file and the log
// together. Several processes may share one file; the file is opened only
// while operations run, and concurrent writers share commits. A process
// holding many conversations open shares one Store per file through
// [OpenShared].
//
// Beyond the contract, a Store verifies its file ([Store.Verify]), rescues
// what a damaged file still holds ([Salvage]), writes a tightly packed copy
// ([Shrink]), and backs up and restores a file ([Store.Backup],
// [Restore]).
//
// Its parts are packages of their own under internal/: the write-ahead
// log (wal), the Store's overlays of it (overlay), appends committed to it
// alone (logappend), logs beside the file that are not its own (straylog),
// the file open only while used (handle), a Store's presence in its files
// (presence), which database a file is (identity), the file layout
// (layout), the bbolt page reader (boltpage), lock waiting (filelock), an
// imported session's records (sessionimport), salvage, the page-by-page
// check (verify), operations on files no Store has open (fileops), the
// registry behind OpenShared (sharing) and Watch's directory watch
// (filewatch); docs/architecture.md maps them.
//
// docs/engines.md describes the guarantees (durability, atomicity,
// conditional writes, damage never crashing the process), the write-ahead
// log, sharing a file between processes and the group commit;
// docs/operations.md says how to copy, move and repair a file; the
// figures behind the choices are in docs/performance.md with the commands
// that reproduce them.
package boltstore
