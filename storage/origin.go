package storage

import "context"

// OriginOf returns where a session came from: the fork that made it (nil
// when none) and, for an epoch other than 0, the rewind that started that
// epoch (nil when none).
func OriginOf(ctx context.Context, e Engine, session string, epoch uint64) (*Lineage, *Rewound, error) {
	var lin *Lineage
	l, ok, err := LineageOf(ctx, e, session)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		lin = &l
		if err := lin.CheckParent(ctx, e); err != nil {
			return nil, nil, err
		}
	}
	if epoch == 0 {
		return lin, nil, nil
	}
	rws, err := RewindsOf(ctx, e, session)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rws {
		if r.Epoch == epoch {
			return lin, &r, nil
		}
	}
	return lin, nil, nil
}
