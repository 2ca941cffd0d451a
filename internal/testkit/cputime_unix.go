//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// CPUTime is the process's user and system CPU time so far, every
// thread's (the garbage collector's too): benchmarks report it beside wall
// time because the test machines are shared, and wall time there measures
// the other tenants as much as the code.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
