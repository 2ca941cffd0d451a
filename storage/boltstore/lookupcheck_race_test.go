package boltstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
)

// A lookup that comes up empty is checked against the file's pages while
// another process rewrites them (derived records and purges commit to bbolt
// at once): the check reads under the same lock as the lookup, so a sound
// file is never reported damaged, and a missing session is ErrNotFound
// every time.
func TestLookupCheckWhileAnotherProcessWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "ctx.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Append(ctx, "seed", text("user", "seed")); err != nil {
		t.Fatal(err)
	}
	cmd := child(t, "bbolt-churn", path, "200")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	lookups := 0
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the writing process: %v", err)
			}
			if lookups < 10 {
				t.Fatalf("only %d lookups ran while the other process wrote", lookups)
			}
			t.Logf("%d lookups of missing sessions", lookups)
			return
		default:
		}
		_, err := st.Session(ctx, fmt.Sprintf("never-%d", i))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("lookup %d of a missing session while another process writes: %v, want ErrNotFound", i, err)
		}
		if _, err := st.Sessions(ctx); err != nil {
			t.Fatalf("Sessions while another process writes: %v", err)
		}
		if _, _, err := st.Append(ctx, fmt.Sprintf("new-%d", i), text("user", "x")); err != nil {
			t.Fatalf("append to a new session while another process writes: %v", err)
		}
		lookups++
	}
}

// childBoltChurn makes arg rounds of writes that commit to bbolt at once
// (a session, a derived record on it, then its purge), splitting and
// freeing pages of the sessions tree.
func childBoltChurn(path, arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		return err
	}
	defer s.Close()
	c := context.Background()
	for i := range n {
		name := fmt.Sprintf("churn-%04d", i)
		if _, _, err := s.Append(c, name, text("user", name)); err != nil {
			return err
		}
		if err := s.PutDerived(c, name, "summary", "k", make([]byte, 3000)); err != nil {
			return err
		}
		if i%3 == 0 {
			if err := s.Purge(c, name); err != nil {
				return err
			}
		}
	}
	return nil
}
