package view

import (
	"testing"

	"github.com/ctxstore/ctxstore"
)

func TestConfigureMapsNone(t *testing.T) {
	_, vc, err := Configure(ctxstore.Config{ProtectedRecent: -1, ProtectedToolResults: -1, SafetyMargin: -1})
	if err != nil {
		t.Fatal(err)
	}
	if vc.ProtectedRecent != 0 || vc.ProtectedToolResults != 0 || vc.SafetyMargin != 0 || !vc.Notice || vc.Estimator == nil {
		t.Errorf("negative = none not mapped, or no default counter: %+v", vc)
	}
	if _, _, err := Configure(ctxstore.Config{Strategy: "bogus"}); err == nil {
		t.Error("an unknown strategy was accepted")
	}
}
