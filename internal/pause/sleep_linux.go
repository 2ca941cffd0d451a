package pause

import (
	"syscall"
	"time"
)

// sleep sleeps the calling thread in the kernel.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
