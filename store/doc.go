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
//   - Atomicity: the records of one Append (or AppendIfEmpty) land
//     together or not at all, with the session's metadata updated in the
//     same transaction, so Sessions and Session never read message bodies.
//   - Nothing is rewritten: Clear starts a new epoch, earlier epochs stay
//     readable; only Purge and PurgeEpoch delete.
//   - Privacy: new files are 0600 and new directories 0700; the mode of
//     an existing file or directory is never changed.
//   - A kill at any moment, including while a new file is being created,
//     leaves a file that opens and holds every acknowledged append
//     (TestCrashKill).
//
// # Several processes, one file
//
// bbolt takes an exclusive flock for a read-write open and holds it until
// Close, so a process that kept the file open would lock every other
// process out. The designs considered:
//
//   - A long-lived handle per process: simplest and fastest per operation,
//     but a second process cannot even read. Rejected (S4).
//   - An owner process serving the others over a socket: one more moving
//     part to start, find, and recover after a crash. Rejected.
//   - Short-lived opens (chosen): the file is open only while operations
//     are in flight. Concurrent operations in one process share one open
//     (reference counted); the last one to finish closes the file, which
//     releases the lock. Between operations any other process may write.
//
// What short-lived opens cost, measured on this machine's ext4 (2 vCPUs,
// BenchmarkOpenClose, a file of 10k messages): flock + bbolt open (meta
// pages, mmap, freelist page) + close ≈ 36 µs; reading one session's
// metadata ≈ 48 µs against 2.7 µs with the file held open; a durable append
// costs 500-1500 µs (two fdatasyncs), so the open is a few percent of it.
// A read pays it once per page of up to 256 entries.
//
// Lock waits: bbolt's own flock polls every 50 ms, which starves a waiter
// whenever the holder appends in a loop (it re-locks within microseconds of
// unlocking). The store instead locks the descriptor itself with a blocking
// flock in a helper goroutine, which the kernel wakes as soon as the lock is
// free, and hands the locked descriptor to bbolt (Options.OpenFile), whose
// own flock on it then succeeds at once. The uncontended case costs one
// non-blocking flock and no goroutine. Every wait is bounded by
// Options.LockTimeout (default 5 s) and the caller's context; after it the
// call fails with ErrLocked naming the file. A blocking flock cannot be
// cancelled, so an abandoned attempt stays pending (at most one per Store)
// and unlocks at once if it succeeds after everyone gave up. After locking,
// the descriptor is checked to still be the file at the path, so a file
// replaced by rename (salvage) is never written through a stale descriptor.
//
// # Group commit
//
// Writes (Append, Clear, PutDerived, ...) go through a queue. A writer that
// finds no commit in progress commits at once, alone: there is no batching
// window. Writers arriving during a commit queue up; when it ends, the first
// of them leads the next commit, which takes the whole queue into one
// transaction and one pair of fsyncs. A write rejected by its checks
// (ErrNotEmpty, ErrNotFound) leaves the others in the transaction alone; a
// write that fails half-way makes the leader retry each queued write in its
// own transaction.
//
// # Page size and fill
//
// Keys are big-endian seqs, so appends always land on the right-most leaf;
// "msgs" buckets use FillPercent 1.0 because a left page is never written
// again. New files use 16 KiB pages: bbolt never splits a node of four keys
// or fewer, so with 4 KiB pages and ~1 KiB messages leaves held 2-3
// messages, often overflowing into a second page, and the file was 1.89×
// the JSON (B6). With 16 KiB pages it is about 1.3×. The price is a larger
// right-most leaf rewritten on each commit (measured within noise on B1).
//
// bbolt's NoFreelistSync would save writing the freelist page on every
// commit (about 15% of commit latency in a probe), but then every open
// rebuilds the freelist by scanning the whole file, which with short-lived
// opens would make every operation O(file size). It stays off.
//
// # Figures
//
// go test ./store -run '^$' -bench . -benchtime 2000x, on this 2-vCPU VM
// with ext4 on a virtio disk, while other builds and tests loaded the
// machine (load average 8-14), so the fsync-bound figures vary run to run:
//
//   - [B1] BenchmarkAppend: p50 append FIGURE_B1
//   - [B2] BenchmarkAppendConcurrent: FIGURE_B2
//   - [B6] BenchmarkDiskUsage (100k single-message appends, ~1 KB JSON each,
//     filled with NoSync: durability changes when bytes reach the disk,
//     not how many): FIGURE_B6
//
// Long soak: CTXSTORE_SOAK=1 makes TestCrashKill kill 300 times instead
// of 24.
package store
