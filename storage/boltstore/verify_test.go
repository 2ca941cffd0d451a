package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
)

func TestVerifyIntactStore(t *testing.T) {
	dir := t.TempDir()
	ts := makeTestStore(t, filepath.Join(dir, "s.db"), 60)
	r := verifyFile(t, ts.path)
	if !r.Intact() || r.Messages != len(ts.msgs) || r.Sessions != 4 {
		t.Fatalf("want intact, %d messages in 4 sessions:\n%s", len(ts.msgs), r)
	}
	want := []PairingIssue{{Session: "alpha", Epoch: 1, Kind: "call_without_result", CallID: "dangling", Seq: uint64(61)}}
	if len(r.Pairing) != 1 || r.Pairing[0] != want[0] || r.OK() {
		t.Errorf("pairing: want %v, got %v", want, r.Pairing)
	}
	if !strings.Contains(r.String(), `call without result "dangling"`) {
		t.Errorf("String does not name the dangling call:\n%s", r)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Error(err)
	}
	ro, err := Open(ts.path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, err := ro.Verify(context.Background()); err != nil || !r.Intact() || r.Messages != len(ts.msgs) {
		t.Errorf("read-only store: %v\n%s", err, r)
	}
}

func TestVerifyReportsPairingAndDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	ctx := context.Background()
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"a","content":"ok"}`,
		`{"role":"tool","tool_call_id":"a","content":"again"}`,
		`{"role":"tool","tool_call_id":"zzz","content":"from nowhere"}`,
		`{"role":"assistant","content":"MARKER-TO-BREAK"}`,
	}
	for _, m := range msgs {
		if _, _, err := st.Append(ctx, "s", Record{Message: ctxstore.MustParseMessage([]byte(m))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Break one message's JSON in place: bbolt still reads the file fine.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"MARKER-TO-BREAK"}`))
	if i < 0 {
		t.Fatal("marker not found")
	}
	data[i+len(`"MARKER-TO-BREAK"`)] = '!'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := verifyFile(t, path)
	got := map[string]bool{}
	for _, p := range r.Pairing {
		got[fmt.Sprintf("%s %s %d", p.Kind, p.CallID, p.Seq)] = true
	}
	for _, w := range []string{"call_without_result b 2", "duplicate_result a 4", "result_without_call zzz 5"} {
		if !got[w] {
			t.Errorf("pairing: missing %q in %v", w, r.Pairing)
		}
	}
	if len(r.Pairing) != 3 {
		t.Errorf("pairing: want 3 issues, got %v", r.Pairing)
	}
	if r.Intact() || len(r.Problems) == 0 || r.Problems[0].Kind != "record" || r.Problems[0].Seq != 6 {
		t.Errorf("want a record problem at seq 6:\n%s", r)
	}
}

// TestStoreOpenDamagedFiles opens every damaged variant of a store through Open in a
// child process: it must fail with ErrCorrupt or open; what opens is verified and
// read in full. The child must never die, and a failed open must leave the file
// byte-identical.
func TestStoreOpenDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	ts := makeTestStore(t, filepath.Join(dir, "good.db"), 100)
	good, err := os.ReadFile(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.NativeEndian.Uint32(good[boltpage.PageHeaderSize+8:])) // from meta page 0
	for _, c := range damageCases(good, ps, damageSeed(t, 5), 12) {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".db")
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			before := fileHash(t, p)
			got := runChild(t, "storeopen", p)
			switch {
			case strings.HasPrefix(got, "corrupt "):
				if fileHash(t, p) != before {
					t.Error("failed open modified the file")
				}
			case c.mustFail:
				t.Errorf("want corrupt, got %q", got)
			case strings.HasPrefix(got, "opened "):
			default:
				t.Errorf("want corrupt or opened, got %q", got)
			}
			t.Logf("%s", got)
		})
	}
}

// childStoreOpen is the child side of TestStoreOpenDamagedFiles.
func childStoreOpen(path string) string {
	ctx := context.Background()
	st, err := Open(path, Options{})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return "corrupt " + oneLine(err.Error())
		}
		return "error " + oneLine(err.Error())
	}
	defer st.Close()
	r, err := st.Verify(ctx)
	if err != nil {
		return "verify-error " + oneLine(err.Error())
	}
	// Reads go through bbolt's mmap, which garbage pages can send astray; the
	// store's own guard turns that into ErrCorrupt (the outer guard is a net for
	// anything it misses: readerr then shows it).
	n := 0
	rerr := boltpage.GuardFaults("read", func() error {
		infos, err := st.Sessions(ctx)
		if err != nil {
			return err
		}
		for _, si := range infos {
			for _, ep := range si.Epochs {
				for _, err := range st.EpochMessages(ctx, si.Name, ep.Epoch, 0) {
					if err != nil {
						return err
					}
					n++
				}
			}
		}
		return nil
	})
	if r.Intact() && rerr != nil {
		return "verify-missed " + oneLine(rerr.Error())
	}
	return fmt.Sprintf("opened intact=%v problems=%d read=%d readerr=%v", r.Intact(), len(r.Problems)+r.MoreProblems, n, rerr != nil)
}
