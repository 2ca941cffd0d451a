//go:build !linux

package filelock

import "os"

// Without Linux OFD locks a holder cannot tell whether another process
// waits, so it never keeps the file open after the last operation.

// AnnounceWaiting does nothing here.
func AnnounceWaiting(*os.File) {}

// DoneWaiting does nothing here.
func DoneWaiting(*os.File) {}

// OthersWaiting cannot tell, so it says yes.
func OthersWaiting(*os.File) bool { return true }

// Nor can a Store tell whether another still has the file open: every Close
// applies the log.

// HoldPresence cannot say the file is open here: it returns nil.
func HoldPresence(string) *os.File { return nil }

// OthersPresent cannot tell here: it says no.
func OthersPresent(string) bool { return false }
