package view_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ctxstore/ctxstore/internal/view"
)

// TestDecisionsRecordForm: the record a manager saves is the compact
// form, smaller than JSON; a damaged one is an error, never a panic; lists
// Compute never makes (out of order) are kept in the JSON form.
func TestDecisionsRecordForm(t *testing.T) {
	d := sampleDecisions()
	rec, err := view.EncodeDecisions(d)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if rec[0] == '{' || len(rec) >= len(plain) {
		t.Errorf("the record is not the compact form (%d bytes, JSON %d)", len(rec), len(plain))
	}
	for n := range len(rec) {
		if _, err := view.DecodeDecisions(rec[:n]); err == nil {
			t.Errorf("a record cut to %d of %d bytes was read", n, len(rec))
		}
	}
	if _, err := view.DecodeDecisions(append(rec[:len(rec):len(rec)], 0)); err == nil {
		t.Error("a record with a byte after its lists was read")
	}
	odd := view.Decisions{Version: 2, Budget: 10, Removed: []uint64{5, 5, 2}}
	if rec, err = view.EncodeDecisions(odd); err != nil {
		t.Fatal(err)
	}
	if back, err := view.DecodeDecisions(rec); err != nil || !reflect.DeepEqual(back, odd) {
		t.Errorf("unordered lists: %+v, %v", back, err)
	}
}
