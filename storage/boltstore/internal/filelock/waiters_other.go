//go:build !linux

package filelock

import "os"

// Without Linux OFD locks a holder cannot tell whether another process
// waits, so it never keeps the file open after the last operation.

func AnnounceWaiting(*os.File) {}

func DoneWaiting(*os.File) {}

func OthersWaiting(*os.File) bool { return true }

// Nor can a Store tell whether another still has the file open: every Close
// applies the log.

func HoldPresence(string) *os.File { return nil }

func OthersPresent(string) bool { return false }
