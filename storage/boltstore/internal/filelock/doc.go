// Package filelock holds the bbolt engine's waiting for file locks in one place: a
// shared blocking attempt many goroutines wait on ([Waiter]), the store file's
// own lock taken through it with a deadline ([Waiter.LockPath]), a shared lock taken
// with a deadline ([Shared]), and the open-file-description locks by which a
// waiting process announces itself so that a long-lived holder lets go
// ([AnnounceWaiting], [OthersWaiting]) and by which open handles say the file is
// in use ([HoldPresence], [OthersPresent]).
//
// The lock protocol itself, which files are locked in which order and why, is
// described in docs/engines.md.
package filelock
