// Package wal is the bbolt engine's write-ahead log: the format of the log
// file beside the database (PATH-wal: a header naming the database and the
// log's generation, then checksummed records of message envelopes), reading
// it back ([ScanFile], [ParseRecord]), and the words in its header by which
// writers tell readers how far it is on disk ([SyncWords], [MarkSynced]).
//
// A [Log] is the log as one Store uses it: the descriptor it keeps open, the
// lock shared by the Store's goroutines and taken on the file against other
// processes, the header read under it, emptying the log after a checkpoint
// and marking syncs for readers. A [Tail] is the overlay of the log on the
// bbolt file: every session the log touches, as the file plus the log make
// it, brought up to date by [Tail.Advance]. What needs bbolt itself (the
// file's transaction, its sessions, applying records to it) stays in the
// engine, which hands it in ([Loader]).
//
// An append is one record synced once; the engine applies the log to the
// bbolt file many records at a time (a checkpoint). docs/engines.md
// describes the protocol, and what a crash at each step leaves.
package wal
