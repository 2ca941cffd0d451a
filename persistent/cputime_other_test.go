//go:build !unix

package persistent

import "time"

// cpuTime is zero where the platform does not tell: the benchmarks then
// report wall time only.
func cpuTime() time.Duration { return 0 }
