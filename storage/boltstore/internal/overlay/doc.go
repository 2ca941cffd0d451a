// Package overlay keeps a Store's overlays of its write-ahead log on the
// bbolt file current: the writer's, which holds every whole record, and the
// readers', which holds the records up to where the log is synced, so that
// nothing a reader shows can vanish in a power cut. Each is a [wal.Tail],
// caught up from the files under the log's lock ([Keeper.CatchUp]) and
// rebuilt when the bbolt file changed.
//
// Every operation asks the same questions: is the log at the path still the
// one open, which file is at the path, has it been committed to, and has the
// log grown. The answers are kept cheap:
//
//   - the log's and the bbolt file's inodes are learnt when they are opened
//     (an open descriptor's inode never changes), so the checks that a path
//     still leads to them are one stat each, without allocating;
//   - the bbolt file's meta pages are read through a descriptor kept open
//     for it, reopened when the file at the path is another one, and not at
//     all while the process has held the bbolt file open (its flock keeps
//     every other writer out) since the tail's txid was read;
//   - a reader whose tail ends where the log is synced up to reads no
//     records: the header, read anyway, says that nothing was added.
//
// Each answer still comes from the files on every read, so another
// process's commit, append, or a file moved over the path is seen at once.
// What needs the bbolt file itself (reading it, its sessions) the Store
// provides as a [File]; applying the log to bbolt is the Store's commit.
package overlay
