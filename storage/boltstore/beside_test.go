package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A derived write leaves the log as it is when the session's metadata need
// not change (its record commits beside the log), and applies it first
// otherwise; either way the writer, a second Store of the file (its own
// tails, as another process has) and a fresh open see every message and the
// record, UpdateDerived's fn sees the log's messages, and Verify is clean.
func TestDerivedBesideLog(t *testing.T) {
	errMine := errors.New("taken")
	cases := []struct {
		name string
		// inBolt messages are checkpointed into bbolt, inLog stay in the log.
		inBolt, inLog int
		update        bool  // UpdateDerived instead of PutDerived
		refuse        bool  // fn refuses: nothing is stored
		wantApplied   bool  // the write applies the log
		wantErr       error // from the write
	}{
		{name: "session in bbolt, messages in the log", inBolt: 3, inLog: 2},
		{name: "update sees the log's messages", inBolt: 3, inLog: 2, update: true},
		{name: "update refused", inBolt: 3, inLog: 2, update: true, refuse: true, wantErr: errMine},
		{name: "session in bbolt, log empty", inBolt: 3},
		{name: "session only in the log", inLog: 2, wantApplied: true},
		{name: "update of a session only in the log", inLog: 2, update: true, wantApplied: true},
		{name: "new session", wantApplied: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, path := openTemp(t)
			var want []string
			add := func(n int) {
				for i := range n {
					s := fmt.Sprintf("m%d", len(want)+i)
					if _, _, err := st.Append(ctx, "s", text("user", s)); err != nil {
						t.Fatal(err)
					}
					want = append(want, s)
				}
			}
			add(c.inBolt)
			if err := st.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			add(c.inLog)
			before, _ := fileIdentity(t, path)
			var err error
			if c.update {
				err = st.UpdateDerived(ctx, "s", "k", "key", func(cur []byte, si SessionInfo) ([]byte, error) {
					if si.LastSeq != uint64(len(want)) || si.Messages != len(want) {
						return nil, fmt.Errorf("fn saw last seq %d and %d messages, want %d", si.LastSeq, si.Messages, len(want))
					}
					if c.refuse {
						return nil, errMine
					}
					return []byte("v"), nil
				})
			} else {
				err = st.PutDerived(ctx, "s", "k", "key", []byte("v"))
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("write: %v, want %v", err, c.wantErr)
			}
			after, _ := fileIdentity(t, path)
			if applied := after != before; applied != c.wantApplied {
				t.Errorf("the write applied the log: %v, want %v (bbolt's record of it went from %+v to %+v)", applied, c.wantApplied, before, after)
			}
			wantValue := []byte("v")
			if c.refuse {
				wantValue = nil
			}
			other, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Store{st, other} {
				checkDerivedBeside(t, s, want, wantValue)
			}
			other.Close()
			st.Close()
			fresh, err := Open(path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			checkDerivedBeside(t, fresh, want, wantValue)
		})
	}
}

// checkDerivedBeside fails unless st shows session "s" holding the messages
// want and derived record k/key holding value (none if nil), and verifies.
func checkDerivedBeside(t *testing.T, st *Store, want []string, value []byte) {
	t.Helper()
	if got := textsOf(t, st, "s"); !slices.Equal(got, want) {
		t.Errorf("%s: messages %q, want %q", st.Path(), got, want)
	}
	v, err := st.GetDerived(ctx, "s", "k", "key")
	switch {
	case value == nil && !errors.Is(err, ErrNotFound):
		t.Errorf("derived record: %q, %v; want none", v, err)
	case value != nil && (err != nil || string(v) != string(value)):
		t.Errorf("derived record: %q, %v; want %q", v, err, value)
	}
	if st.opts.ReadOnly {
		r, err := st.Verify(ctx)
		if err != nil || !r.Intact() {
			t.Errorf("verify: %v, %+v", err, r)
		}
	}
}

// A derived write beside the log moves on the tails of the Store that made
// it, and every other Store of the file sees the new bbolt transaction: a
// reader there catches up with the log and bbolt as usual, and a file moved
// over the path in between is seen at once by both.
func TestDerivedBesideLogThenFileMoved(t *testing.T) {
	st, path := openTemp(t)
	if _, _, err := st.Append(ctx, "s", text("user", "one")); err != nil {
		t.Fatal(err)
	}
	if err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Append(ctx, "s", text("user", "two")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutDerived(ctx, "s", "k", "key", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got := textsOf(t, st, "s"); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("messages %q", got)
	}
	// Another database moved over the path: the Store refuses to read it
	// as its own.
	otherPath := filepath.Join(t.TempDir(), "other.db")
	o, err := Open(otherPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Append(ctx, "s", text("user", "elsewhere")); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := os.Rename(otherPath, path); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, "s"); !errors.Is(err, ErrMoved) {
		t.Fatalf("a read after the file was replaced: %v, want ErrMoved", err)
	}
}
