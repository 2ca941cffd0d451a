package persistent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/internal/testkit"
)

// The process variant of the chaos test: the writers are child processes
// (this test binary re-run as TestChaosChild), so every store operation
// goes through the file lock between processes. The parent edits the
// memory files meanwhile and runs one writer of its own.

const (
	chaosDBEnv    = "CTXSTORE_CHAOS_DB"
	chaosFilesEnv = "CTXSTORE_CHAOS_FILES" // memory files, os.PathListSeparator between
	chaosArgsEnv  = "CTXSTORE_CHAOS_ARGS"  // "writer ops seed"
	chaosOutEnv   = "CTXSTORE_CHAOS_OUT"   // where the child writes its log (JSON)
)

// TestChaosChild is not a test: it is the body of a chaos writer process.
func TestChaosChild(t *testing.T) {
	testkit.Child(t, func(string) error {
		var id, ops int
		var seed uint64
		if _, err := fmt.Sscan(os.Getenv(chaosArgsEnv), &id, &ops, &seed); err != nil {
			return fmt.Errorf("%s=%q: %v", chaosArgsEnv, os.Getenv(chaosArgsEnv), err)
		}
		// No clock shared with the parent, and the parent makes the edits.
		env := &chaosEnv{db: os.Getenv(chaosDBEnv), files: filepath.SplitList(os.Getenv(chaosFilesEnv))}
		log := newChaosWriter(env, id, ops, seed).run(context.Background())
		b, err := json.Marshal(log)
		if err != nil {
			return err
		}
		return os.WriteFile(os.Getenv(chaosOutEnv), b, 0o600)
	})
}

// chaosRole is the role of a chaos writer process, which TestChaosChild
// plays (TestMain leaves it to the test).
const chaosRole = "chaos-writer"

// runChaosChild runs writer id as a child process and returns its log.
func runChaosChild(env *chaosEnv, dir string, id, ops int, seed uint64) (chaosLog, error) {
	out := filepath.Join(dir, fmt.Sprintf("writer%d.json", id))
	cmd := testkit.Command("TestChaosChild", chaosRole, chaosDBEnv+"="+env.db,
		chaosFilesEnv+"="+strings.Join(env.files, string(os.PathListSeparator)),
		chaosArgsEnv+"="+fmt.Sprintf("%d %d %d", id, ops, seed), chaosOutEnv+"="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return chaosLog{}, fmt.Errorf("writer %d: %v\n%s", id, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return chaosLog{}, fmt.Errorf("writer %d: %w", id, err)
	}
	var log chaosLog
	if err := json.Unmarshal(b, &log); err != nil {
		return chaosLog{}, fmt.Errorf("writer %d: log: %w", id, err)
	}
	return log, nil
}

func TestChaosProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	seed := chaosSeed(t)
	t.Logf("seed %d (replay the operations with CTXSTORE_CHAOS_SEED=%d)", seed, seed)
	rounds, scale := chaosRounds()
	for r := range rounds {
		t.Run("round"+strconv.Itoa(r), func(t *testing.T) {
			s := seed + uint64(r)*1000 + 11
			env := chaosSetup(t, 1+int(s%2))
			env.clock = nil // the children share no clock with the parent
			dir := t.TempDir()
			const children = 3
			logs := make([]chaosLog, children+1)
			var wg sync.WaitGroup
			for i := range children {
				wg.Go(func() {
					log, err := runChaosChild(env, dir, i, 80*scale, s)
					if err != nil {
						t.Error(err)
					}
					logs[i] = log
				})
			}
			done := make(chan struct{})
			editorDone := make(chan struct{})
			go func() {
				defer close(editorDone)
				env.runEditor(t, s, done)
			}()
			logs[children] = newChaosWriter(env, children, 80*scale, s).run(context.Background())
			wg.Wait()
			close(done)
			<-editorDone
			if t.Failed() {
				return
			}
			checkChaos(t, env, logs)
		})
	}
}

// runEditor edits the memory files now and then until done is closed, as
// a person would while the writers run.
func (env *chaosEnv) runEditor(t *testing.T, seed uint64, done <-chan struct{}) {
	w := newChaosWriter(env, 100, 0, seed) // for its random source
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Duration(2+w.rng.IntN(10)) * time.Millisecond):
		}
		if err := env.edit(w.rng.IntN(len(env.files))); err != nil {
			t.Error(err)
			return
		}
	}
}
