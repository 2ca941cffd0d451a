// Package wal is the bbolt engine's write-ahead log: the format of the log
// file beside the database (PATH-wal: a header naming the database and the
// log's generation, then checksummed records of message envelopes), reading
// it back ([ScanFile], [ParseRecord]), and the words in its header by which
// writers tell readers how far it is on disk ([SyncWords], [MarkSynced]).
//
// An append is one record synced once; the engine applies the log to the
// bbolt file many records at a time (a checkpoint). docs/engines.md
// describes the protocol, and what a crash at each step leaves.
package wal
