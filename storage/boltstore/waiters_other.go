//go:build !linux

package boltstore

import "os"

// Without Linux OFD locks a holder cannot tell whether another process
// waits, so it never keeps the file open after the last operation.

func announceWaiting(*os.File) {}

func doneWaiting(*os.File) {}

func othersWaiting(*os.File) bool { return true }

// Nor can a Store tell whether another still has the file open: every Close
// applies the log.

func holdPresence(string) *os.File { return nil }

func othersPresent(string) bool { return false }
