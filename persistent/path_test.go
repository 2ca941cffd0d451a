package persistent

import (
	"strings"
	"testing"
)

// A directory given as the store's path is an error naming it, not a panic.
func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(dir, "s", Config{})
	if err == nil {
		m.Close()
		t.Fatal("Open on a directory succeeded")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("Open on a directory: %v, want an error naming it as a directory", err)
	}
}
