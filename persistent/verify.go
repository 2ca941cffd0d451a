package persistent

import (
	"context"

	"github.com/ctxstore/ctxstore/storage"
)

// SetAsideRepaired removes from rep the calls without results that repair
// records answer (a run interrupted mid-call and repaired on resume, see
// RepairInterruptedTail), and returns them. Such a call is not lost: views
// answer it with InterruptedText, so an audit need not fail for it.
func SetAsideRepaired(ctx context.Context, st storage.Engine, rep *storage.VerifyReport) ([]RepairedCall, error) {
	type key struct {
		session string
		epoch   uint64
		call    string
	}
	known := map[key]RepairedCall{}
	seen := map[string]bool{}
	for _, p := range rep.Pairing {
		if p.Kind != storage.CallWithoutResult || seen[p.Session] {
			continue
		}
		seen[p.Session] = true
		calls, err := RepairedCalls(ctx, st, p.Session)
		if err != nil {
			return nil, err
		}
		for _, c := range calls {
			known[key{c.Session, c.Epoch, c.CallID}] = c
		}
	}
	var repaired []RepairedCall
	kept := rep.Pairing[:0]
	for _, p := range rep.Pairing {
		if c, ok := known[key{p.Session, p.Epoch, p.CallID}]; ok && p.Kind == storage.CallWithoutResult {
			repaired = append(repaired, c)
			continue
		}
		kept = append(kept, p)
	}
	rep.Pairing = kept
	return repaired, nil
}
