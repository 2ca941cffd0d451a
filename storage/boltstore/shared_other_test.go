//go:build !linux

package boltstore

import "errors"

// childSharedPresence is the child side of TestOpenSharedReleasesFile,
// which runs on Linux only (it reads other processes' presence through
// /proc).
func childSharedPresence(path, arg string) error {
	return errors.New("shared-presence: Linux only")
}
