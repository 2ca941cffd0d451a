package persistent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/view"
	"github.com/ctxstore/ctxstore/storage"
)

// TestOldDecisionsRecordLoads: view decisions saved in the plain JSON form
// earlier versions wrote are read as the compact record is: the reopened
// session continues them (the same view, decisions reused), and the
// record written now is the compact form.
func TestOldDecisionsRecordLoads(t *testing.T) {
	ctx := context.Background()
	const budget = 6000
	for _, form := range []string{"compact", "json"} {
		t.Run(form, func(t *testing.T) {
			path := dbPath(t)
			cfg := Config{noSync: true}
			m := open(t, path, "s", cfg)
			for i, msg := range conversation(240, 1500) {
				addAll(t, m, []ctxstore.Message{msg})
				if i%7 == 0 {
					viewOf(t, m, budget)
				}
			}
			want := explainOf(t, m, budget)
			if want.Removed == 0 {
				t.Fatal("the test needs decisions that remove messages")
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			st := otherStore(t, path)
			records := 0
			for d, err := range st.ListDerived(ctx, "s", KindView) {
				if err != nil {
					t.Fatal(err)
				}
				records++
				if d.Value[0] == '{' {
					t.Fatalf("record %s is saved as JSON, not in the compact form", d.Key)
				}
				if form == "compact" {
					continue
				}
				dec, err := view.DecodeDecisions(d.Value)
				if err != nil {
					t.Fatal(err)
				}
				old, err := json.Marshal(dec)
				if err != nil {
					t.Fatal(err)
				}
				if err := storage.PutDerived(ctx, st, "s", KindView, d.Key, old); err != nil {
					t.Fatal(err)
				}
			}
			if records == 0 {
				t.Fatal("no view decisions were saved")
			}
			st.Close()
			r := open(t, path, "s", cfg)
			got := explainOf(t, r, budget)
			if d := diff(got.Messages, want.Messages); d != "" {
				t.Fatalf("view from the %s record differs: %s", form, d)
			}
			if !got.Reused || got.Escalated {
				t.Errorf("the %s record's decisions were not reused (reused %v, escalated %v)", form, got.Reused, got.Escalated)
			}
		})
	}
}
