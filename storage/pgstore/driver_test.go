package pgstore

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage"
)

// TestDriverClaimsAndRedacts: the registry gives a keyword/value connection
// string to this engine's driver (a path stays the file engine's), and
// storage.Redact and storage.Shareable hide its passwords.
func TestDriverClaimsAndRedacts(t *testing.T) {
	for _, target := range []string{"host=h dbname=d", "postgres://u@h/d", "postgresql://h/d"} {
		d, err := storage.DriverOf(target, "")
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if _, ok := d.(driver); !ok {
			t.Errorf("%s: driver %T, want pgstore's", target, d)
		}
	}
	if d, err := storage.DriverOf("dir/host=h.db", ""); err == nil {
		if _, ok := d.(driver); ok {
			t.Errorf("a path holding '=' went to pgstore")
		}
	}
	if got := storage.Redact("host=h password=secret dbname=d"); got != "host=h password=xxxxx dbname=d" {
		t.Errorf("Redact: %q", got)
	}
	s, note := storage.Shareable("postgres://u:secret@h/d")
	if s != "postgres://u@h/d" || note != "password left out: set PGPASSWORD or use ~/.pgpass" {
		t.Errorf("Shareable: %q, %q", s, note)
	}
	if s, note := storage.Shareable("some/file.db"); s != "some/file.db" || note != "" {
		t.Errorf("Shareable of a path: %q, %q", s, note)
	}
}
