package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bigCommitFile makes a store whose last commit is one Append of n messages
// to "big" after a few small commits to "small", so the older meta page
// describes a file without them. It returns the file's bytes, its page size
// and which meta page holds the newest commit.
func bigCommitFile(t *testing.T, path string, n int) ([]byte, int, int) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if _, _, err := s.Append(ctx, "small", text("user", fmt.Sprintf("small %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = text("user", fmt.Sprintf("big %d %s", i, strings.Repeat("x", 60)))
	}
	if _, _, err := s.Append(ctx, "big", recs...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.NativeEndian.Uint32(data[boltpage.PageHeaderSize+8:]))
	txid := func(page int) uint64 { return binary.NativeEndian.Uint64(data[page*ps+boltpage.PageHeaderSize+48:]) }
	newest := 0
	if txid(1) > txid(0) {
		newest = 1
	}
	return data, ps, newest
}

// A damaged meta page is never silently skipped: the file is refused with
// ErrCorrupt naming the file and the fix, it is not modified, and salvage
// recovers every message, the newest commit's too, with true counts.
func TestDamagedMetaPageRefusedAndSalvaged(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	good, ps, newest := bigCommitFile(t, filepath.Join(dir, "good.db"), n)
	zero := func(pages ...int) []byte {
		d := bytes.Clone(good)
		for _, p := range pages {
			clear(d[p*ps : (p+1)*ps])
		}
		return d
	}
	garbage := bytes.Clone(good)
	garbage[newest*ps+boltpage.PageHeaderSize+20] ^= 0xff // checksum no longer matches
	cases := []struct {
		name string
		data []byte
	}{
		{"zeroed newest meta", zero(newest)},
		{"zeroed older meta", zero(1 - newest)},
		{"zeroed meta page 0", zero(0)},
		{"zeroed meta page 1", zero(1)},
		{"zeroed both meta pages", zero(0, 1)},
		{"bad checksum on newest meta", garbage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".db")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			for _, want := range []string{path, "meta page"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, c.data) {
				t.Fatal("the refused open modified the file")
			}
			rep, err := Salvage(context.Background(), path, path+".salvaged")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Recovered != n+3 || rep.Missing != 0 || rep.MissingUnknown || rep.Skipped != 0 {
				t.Fatalf("salvage: %d recovered, %d missing (unknown %v), %d skipped; want %d, 0, 0\n%s",
					rep.Recovered, rep.Missing, rep.MissingUnknown, rep.Skipped, n+3, rep)
			}
			out, err := Open(path+".salvaged", Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			info, err := out.Session(context.Background(), "big")
			if err != nil || info.Messages != n || info.LastSeq != n {
				t.Fatalf("salvaged session big: %+v, %v", info, err)
			}
		})
	}
}

// A file cut short never yields "0 missing" when messages are gone: either
// the count is true, or the report says it is only a lower bound.
func TestSalvageCutShortCountsMissing(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	good, ps, _ := bigCommitFile(t, filepath.Join(dir, "good.db"), n)
	hwm := int(max(binary.NativeEndian.Uint64(good[boltpage.PageHeaderSize+40:]), binary.NativeEndian.Uint64(good[ps+boltpage.PageHeaderSize+40:])))
	for _, keep := range []int{hwm * ps * 3 / 4, hwm * ps / 2, hwm * ps / 3, (hwm - 1) * ps} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("cut-%d.db", keep))
			if err := os.WriteFile(path, good[:keep], 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Salvage(context.Background(), path, path+".salvaged")
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Errorf("a file cut short reported as fully recovered:\n%s", rep)
			}
			gone := n + 3 - rep.Recovered - rep.Skipped
			if gone > 0 && rep.Missing < gone && !rep.MissingUnknown {
				t.Errorf("%d messages gone, report says %d missing and claims to know:\n%s", gone, rep.Missing, rep)
			}
			if gone > 0 && !strings.Contains(rep.String(), "missing") {
				t.Errorf("report does not mention missing messages:\n%s", rep)
			}
		})
	}
}
