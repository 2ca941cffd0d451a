//go:build unix

package tokens

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time so far: benchmarks
// report it beside wall time because the test machines are shared, and
// wall time there measures the other tenants as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
