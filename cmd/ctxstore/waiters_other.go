//go:build !linux

package main

import "os"

// Without Linux OFD locks there is no way to announce a wait; store
// processes then let go of the file a moment after each operation anyway.
func announceWaiting(*os.File) {}

func doneWaiting(*os.File) {}
