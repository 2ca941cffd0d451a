package wal

import "path/filepath"

// LogPath is the write-ahead log of the store file at path (PATH-wal). A
// symlink is followed: the log is beside the file it points to, so
// processes naming the file directly or through symlinks share one log.
func LogPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path + Suffix
}
