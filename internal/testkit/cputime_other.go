//go:build !unix

package testkit

import "time"

// CPUTime is unknown here: zero, and benchmarks report wall time only.
func CPUTime() time.Duration { return 0 }
