package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ctxstore/ctxstore/internal/testkit"
	"github.com/ctxstore/ctxstore/storage"
)

// TestBackupKeepsNoBytesOfAnErase: a backup taken while another process
// erases (its commit done, its scrub not yet) copies the erased messages'
// old bytes, free pages of the file, which the scrub then zeroes in the
// file but not in the copy: a backup holding the erase must not hold the
// text it took away.
func TestBackupKeepsNoBytesOfAnErase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	st, err := Open(path, Options{})
	must(t, err)
	defer st.Close()
	const rounds = 150
	for i := range rounds {
		if _, _, err := st.Append(ctx, fmt.Sprintf("s%d", i), text("user", fmt.Sprintf("the secret aardvark%04d", i)), text("user", "kept")); err != nil {
			t.Fatal(err)
		}
	}
	must(t, st.Checkpoint(ctx))
	_, lines := startPiped(t, "TestBackupEraseChild", "eraser", envPath+"="+path, envArg+"="+strconv.Itoa(rounds))
	for i := range rounds {
		if !lines.Scan() || lines.Text() != "erasing" {
			t.Fatalf("eraser: %q %v", lines.Text(), lines.Err())
		}
		// The erase is on its way (committing, scrubbing): back up now.
		bk := filepath.Join(dir, fmt.Sprintf("b%d.db", i))
		must(t, st.Backup(ctx, bk))
		if !lines.Scan() || lines.Text() != "erased" {
			t.Fatalf("eraser: %q %v", lines.Text(), lines.Err())
		}
		b, err := os.ReadFile(bk)
		must(t, err)
		word := []byte(fmt.Sprintf("aardvark%04d", i))
		if !bytes.Contains(b, word) {
			continue
		}
		c, err := Open(bk, Options{ReadOnly: true})
		must(t, err)
		ents, err := c.Get(ctx, fmt.Sprintf("s%d", i), 1)
		c.Close()
		must(t, err)
		if m, _ := ents[0].Message(); !bytes.Contains([]byte(m.Text()), word) {
			t.Fatalf("round %d: the backup holds the erase (seq 1 reads %q) and the bytes it took away", i, m.Text())
		}
	}
}

// TestBackupEraseChild is not a test: it is the body of the child process
// of TestBackupKeepsNoBytesOfAnErase, which erases seq 1 of sessions s0,
// s1, ... in turn, saying when it starts and ends each.
func TestBackupEraseChild(t *testing.T) {
	testkit.Child(t, func(role string) error {
		st, err := Open(os.Getenv(envPath), Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		n, _ := strconv.Atoi(os.Getenv(envArg))
		for i := range n {
			fmt.Println("erasing")
			if _, err := storage.Erase(context.Background(), st, fmt.Sprintf("s%d", i), eraseDrops, 1); err != nil {
				return err
			}
			fmt.Println("erased")
		}
		return nil
	})
}
