package search

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/ctxstore/ctxstore/storage"
)

// Unsaved returns how many messages were indexed or forgotten since the
// index's file was last written.
func (ix *Index) Unsaved() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.added
}

// Rebuild discards the index and builds it again from eng's log.
func (ix *Index) Rebuild(ctx context.Context, eng storage.Engine) error {
	ix.syncMu.Lock()
	ix.mu.Lock()
	ix.st = state{}
	ix.loadErr, ix.lastTok = nil, nil
	ix.mu.Unlock()
	ix.syncMu.Unlock()
	return ix.Sync(ctx, eng)
}

// docKey names a message across indexes.
type docKey struct {
	session string
	seq     uint64
}

// Verify catches the index up with eng's log, builds a second index from
// the log alone and reports, as problems, an index file that could not be
// read and every message the two index differently. It fixes nothing:
// Rebuild does.
func (ix *Index) Verify(ctx context.Context, eng storage.Engine) ([]string, error) {
	var problems []string
	if err := ix.LoadError(); err != nil {
		problems = append(problems, fmt.Sprintf("search index %s: %v (rebuilt from the log)", ix.path, err))
	}
	if err := ix.Sync(ctx, eng); err != nil {
		return nil, err
	}
	fresh := Open("")
	if err := fresh.Sync(ctx, eng); err != nil {
		return nil, err
	}
	// A message appended between the two catch-ups is in fresh only.
	if err := ix.Sync(ctx, eng); err != nil {
		return nil, err
	}
	ix.mu.RLock()
	have := ix.st.fingerprints()
	ix.mu.RUnlock()
	want := fresh.st.fingerprints()
	for k, w := range want {
		h, ok := have[k]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("search index: session %q seq %d is not indexed", k.session, k.seq))
		case h != w:
			problems = append(problems, fmt.Sprintf("search index: session %q seq %d is indexed with other terms than its text has", k.session, k.seq))
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			problems = append(problems, fmt.Sprintf("search index: session %q seq %d is indexed but not in the log (purged?)", k.session, k.seq))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// fingerprints returns, for each live doc, a hash of what the index holds
// of it: epoch, role, time, length and its terms with their counts.
func (s *state) fingerprints() map[docKey]uint64 {
	fp := make([]uint64, len(s.docs))
	for t, ps := range s.post {
		h := fnv.New64a()
		h.Write([]byte(t))
		th := h.Sum64()
		for _, p := range ps {
			fp[p.doc] += th * uint64(p.tf|1) * (uint64(p.tf) + 1)
		}
	}
	out := make(map[docKey]uint64, s.live)
	for i, d := range s.docs {
		if d.dead {
			continue
		}
		h := fnv.New64a()
		fmt.Fprintf(h, "%d %s %d %d %d", d.epoch, s.roles[d.role], d.time, d.length, fp[i])
		out[docKey{s.names[d.sid], d.seq}] = h.Sum64()
	}
	return out
}
