package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// A fork racing an erase of its source by another handle: a copy whose
// messages were copied after the erase (they hold the marker nowhere)
// must not hold it in its title or in the summaries carried with it.
func TestForkRacingEraseCarriesNothingErased(t *testing.T) {
	dsn := testDSN(t)
	schema := freshSchema(t, dsn)
	st, other := openTest(t, dsn, schema), openTest(t, dsn, schema)
	ctx := context.Background()
	const marker = "platypusSECRET3141"
	bad := 0
	for round := range 40 {
		src, dst := fmt.Sprintf("s%d", round), fmt.Sprintf("d%d", round)
		for _, m := range []ctxstore.Message{ctxstore.NewMessage("user", "my key is "+marker), ctxstore.NewMessage("assistant", "noted")} {
			if _, _, err := st.Append(ctx, src, storage.Record{Message: m}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.PutDerived(ctx, src, eraseDrops[0], "e1/b1000", []byte(`{"summary":"key `+marker+`"}`)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = storage.Fork(ctx, st, src, dst, 0, []storage.Carry{{Kind: eraseDrops[0]}})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(round%8) * time.Millisecond)
			if _, err := storage.Erase(ctx, other, src, eraseDrops, 1); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		info, err := st.Session(ctx, dst)
		if err != nil {
			continue // the fork refused
		}
		copied := false
		for ent, err := range st.Messages(ctx, dst, 0) {
			if err != nil {
				t.Fatal(err)
			}
			copied = copied || bytes.Contains(ent.Raw, []byte(marker))
		}
		if copied {
			continue // copied before the erase: a copy of what was there
		}
		if strings.Contains(info.Title, marker) {
			bad++
			t.Errorf("round %d: %s's messages were copied after the erase but its title is %q", round, dst, info.Title)
		}
		for d, err := range st.ListDerived(ctx, dst, eraseDrops[0]) {
			if err == nil && bytes.Contains(d.Value, []byte(marker)) {
				bad++
				t.Errorf("round %d: %s's messages were copied after the erase but its carried summary %s holds the erased text", round, dst, d.Key)
			}
		}
	}
	t.Logf("%d inconsistent copies in 40 rounds", bad)
}
