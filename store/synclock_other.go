//go:build !linux

package store

import (
	"os"
	"time"
)

// Without open file description locks, appenders poll for another
// process's sync (see synclock_linux.go).

func holdSyncLock(*os.File) bool { return false }

func releaseSyncLock(*os.File) {}

// syncWaiter has nothing to wait on here.
type syncWaiter struct{}

func (*syncWaiter) wait(string, time.Duration) bool { return false }
