package wal

import (
	"encoding/binary"
	"os"
)

// Every appender syncs the log itself, after releasing the lock, and then
// says in the log's header, under the lock, how far the log is known to be on
// disk (logSynced): readers show records only up to there. Several
// processes' syncs need no coordination of ours: the kernel merges
// concurrent syncs of one file (ext4's journal commits the records of every
// fdatasync that arrives during a commit in the next one), and a sync
// flushes whatever was written before it began, whoever wrote it. Earlier
// builds (before the first release) announced a sync in progress in
// logSyncing and made other appenders wait for it; the word is kept at or
// past logSynced, so that a process of such a build sharing the file never
// waits for a sync nobody runs.
const (
	GenAt     = 32
	SyncedAt  = 48
	SyncingAt = 56
	// SyncMarkTries bounds the waits (each up to LockTimeout) for the lock
	// to mark a finished sync.
	SyncMarkTries = 3
)

// WriteWord writes v, little-endian, at offset at of the log's header.
func WriteWord(f *os.File, at int64, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, _ = f.WriteAt(b[:], at)
}

// SyncWords reads the log's generation and its synced and syncing words.
func SyncWords(f *os.File) (gen, synced, syncing uint64, err error) {
	var b [HeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, 0, err
	}
	return binary.LittleEndian.Uint64(b[GenAt:]), binary.LittleEndian.Uint64(b[SyncedAt:]), binary.LittleEndian.Uint64(b[SyncingAt:]), nil
}

// MarkSynced records, under the exclusive lock, that the log is synced up
// to end (for a NoSync store: acknowledged up to end), given its synced and
// syncing words as just read.
func MarkSynced(f *os.File, end int64, synced, syncing uint64) {
	if synced >= uint64(end) {
		return
	}
	if syncing >= uint64(end) {
		WriteWord(f, SyncedAt, uint64(end))
		return
	}
	// The two words are side by side: one write sets both.
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], uint64(end))
	binary.LittleEndian.PutUint64(b[SyncingAt-SyncedAt:], uint64(end))
	_, _ = f.WriteAt(b[:], SyncedAt)
}
