package identity

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// hardLinkSettle is how long CheckOneName waits for a second name to go
// away: Create links a new file into place from a temporary name, which
// it removes a moment later.
const hardLinkSettle = 500 * time.Millisecond

// CheckOneName refuses a store file with more than one name (hard links):
// the log is found by name, so each name would have a log of its own, and
// appends made through one would be lost to the other.
func CheckOneName(path string) error {
	end := time.Now().Add(hardLinkSettle)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("store %s: %w", path, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Nlink <= 1 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("store %s: the file has %d names (hard links); ctxstore keeps a log beside each name, "+
				"so appends through one name would be lost to the other: remove the other names "+
				"(find them with: find / -xdev -samefile %s) and use one name, or symlinks to it", path, st.Nlink, path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
