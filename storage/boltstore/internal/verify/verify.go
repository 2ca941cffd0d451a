package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/boltpage"
	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// Tombstones checks that every purged name's layout.Tombstone decodes: a
// session can no longer be created under a name whose layout.Tombstone does not.
func Tombstones(tx *bbolt.Tx, r *storage.VerifyReport) {
	sb := tx.Bucket([]byte(layout.BucketStore))
	if sb == nil {
		return
	}
	pb := sb.Bucket([]byte(layout.BucketPurged))
	if pb == nil {
		return
	}
	_ = pb.ForEach(func(k, _ []byte) error {
		if _, _, err := layout.ReadTombstone(tx, string(k)); err != nil {
			r.AddProblem("meta", string(k), 0, "%v", err)
		}
		return nil
	})
}

// Pages walks the file behind path and checks every session. It reports
// whether the page structure was sound, and the first record it found written
// by a newer ctxstore (storage.ErrNewerFormat), if any.
func Pages(ctx context.Context, path string, r *storage.VerifyReport) (sound bool, newer error) {
	bf, err := boltpage.Open(path)
	if bf == nil {
		r.AddProblem("structure", "", 0, "%v", err)
		return false, nil
	}
	defer bf.Close()
	if err == nil {
		err = bf.CheckMeta()
	}
	if err == nil {
		err = bf.CheckRootAndFreelist()
	}
	if err != nil {
		r.AddProblem("structure", "", 0, "%v", err)
		return false, nil
	}
	w := boltpage.NewWalker(bf)
	flat(ctx, w, boltpage.BucketRoot{Page: bf.Meta.Root}, r, &newer)
	for _, is := range w.Issues {
		r.AddProblem("structure", "", 0, "%s", is)
	}
	return len(w.Issues) == 0, newer
}

// topBuckets finds the root's buckets; a missing one of the names given is
// an issue of the walk.
func topBuckets(w *boltpage.Walker, root boltpage.BucketRoot, names ...string) (map[string]boltpage.BucketRoot, bool) {
	out := map[string]boltpage.BucketRoot{}
	w.ForEach(nil, root, func(e boltpage.Elem) bool {
		if e.Bucket {
			if br, ok := w.Sub(nil, e); ok {
				out[string(e.Key)] = br
			}
		}
		return true
	})
	for _, name := range names {
		if _, ok := out[name]; !ok {
			w.Issue(nil, root.Page, "no %q bucket reachable from the root", name)
			return nil, false
		}
	}
	return out, true
}

// flat checks every session of a format 3 file: its record, then its
// messages, which follow in the messages bucket in session number order,
// then the derived records, which must each belong to a session too.
func flat(ctx context.Context, w *boltpage.Walker, root boltpage.BucketRoot, r *storage.VerifyReport, newer *error) {
	tops, ok := topBuckets(w, root, layout.BucketNames, layout.BucketMessages)
	if !ok {
		return
	}
	o := &owners{r: r, byID: map[uint64]*sessionVerifier{}, last: tops[layout.BucketNames].Sequence, stray: map[uint64]*strayTally{}}
	var order []*sessionVerifier
	w.ForEach([]string{layout.BucketNames}, tops[layout.BucketNames], func(e boltpage.Elem) bool {
		name := string(e.Key)
		r.Sessions++
		v := &sessionVerifier{r: r, name: name, epochs: map[uint64]*epochTally{}, pairs: storage.PairingAudit{Session: name}, newer: newer}
		order = append(order, v)
		id, m, err := layout.DecodeRecord(e.Value)
		switch {
		case e.Bucket:
			r.AddProblem(storage.ProblemMeta, name, 0, "a bucket where the session's record belongs")
		case err != nil:
			r.AddProblem(storage.ProblemMeta, name, 0, "%v", err)
		case o.byID[id] != nil:
			r.AddProblem(storage.ProblemMeta, name, 0, "session number %d is also session %q's", id, o.byID[id].name)
		default:
			o.byID[id] = v
			v.setMeta(m)
			if id > o.last {
				r.AddProblem(storage.ProblemNumber, name, 0, "session number %d is above %d, the last the file has given out: "+
					"the next sessions created would be given it too and share its messages; "+
					"ctxstore doctor --salvage OUT.db copies every session into a new file, numbered afresh", id, o.last)
			}
		}
		return ctx.Err() == nil
	})
	w.ForEach([]string{layout.BucketMessages}, tops[layout.BucketMessages], func(e boltpage.Elem) bool {
		id, seq, ok := layout.SplitMsgKey(e.Key)
		v := o.byID[id]
		switch {
		case !ok:
			r.Messages++
			r.AddProblem(storage.ProblemRecord, "", 0, "unreadable record under a damaged key")
		case v == nil:
			r.Messages++
			o.tally(id).messages++
		default:
			e.Key = layout.SeqKey(seq)
			v.message(e)
		}
		return ctx.Err() == nil
	})
	if derived, ok := tops[layout.BucketDerivedRecords]; ok {
		w.ForEach([]string{layout.BucketDerivedRecords}, derived, func(e boltpage.Elem) bool {
			id, _, _, ok := layout.SplitDerivedKey(e.Key)
			switch {
			case e.Bucket || !ok:
				r.AddProblem(storage.ProblemRecord, "", 0, "a derived record under a damaged key")
			case o.byID[id] == nil:
				o.tally(id).derived++
			}
			return ctx.Err() == nil
		})
	}
	for _, v := range order {
		v.finish()
	}
	o.report()
}

// owners is what the session records say about session numbers: whose
// each is, and the last one the file has given out (the names bucket's
// sequence). It counts the records under the numbers no record names.
type owners struct {
	r     *storage.VerifyReport
	byID  map[uint64]*sessionVerifier
	last  uint64
	stray map[uint64]*strayTally
}

// strayTally counts the records under one session number no record names.
type strayTally struct{ messages, derived int }

func (o *owners) tally(id uint64) *strayTally {
	t := o.stray[id]
	if t == nil {
		t = &strayTally{}
		o.stray[id] = t
	}
	return t
}

// report adds a problem for each session number with records and no
// session record: an orphan, or, above the numbers given out, a number the
// next sessions created would be given, taking the records in.
func (o *owners) report() {
	for _, id := range slices.Sorted(maps.Keys(o.stray)) {
		t := o.stray[id]
		var held []string
		if t.messages > 0 {
			held = append(held, plural(t.messages, "message"))
		}
		if t.derived > 0 {
			held = append(held, plural(t.derived, "derived record"))
		}
		what := fmt.Sprintf("%s under session number %d, which no session record names", strings.Join(held, " and "), id)
		fix := "ctxstore doctor --salvage OUT.db copies the messages into a new file, under the session their records name, and leaves the derived records out"
		if id > o.last {
			o.r.AddProblem(storage.ProblemNumber, "", 0, "%s, above %d, the last the file has given out: the next sessions created would be given it and take them in; %s", what, o.last, fix)
			continue
		}
		o.r.AddProblem(storage.ProblemOrphan, "", 0, "%s: no command reads them; %s", what, fix)
	}
}

// setMeta takes the session's metadata, which the messages are checked
// against.
func (v *sessionVerifier) setMeta(m layout.Meta) {
	v.meta = &m
	v.epochList = storage.NewEpochAudit(v.r, m.Info(v.name))
	if m.Importing {
		v.r.AddProblem("import", v.name, 0, "an import of this session has not finished (%d messages so far): if no import is running, purge the session and import it again", m.Total)
	}
}

// implausibleSeq is a seq no session reaches (a million appends a second
// for nine years): a key that reads as a larger one is damaged.
const implausibleSeq = 1 << 48

// epochTally is what one epoch's messages add up to.
type epochTally struct {
	messages, tokens int
	bytes            int64
	counters         map[string]layout.CounterSum // the current epoch's only
}

// sessionVerifier checks one session's messages as they stream past in key order.
type sessionVerifier struct {
	r    *storage.VerifyReport
	name string
	meta *layout.Meta
	// epochList checks the messages against meta's epoch list.
	epochList *storage.EpochAudit
	epochs    map[uint64]*epochTally
	lastSeq   uint64
	lastEp    uint64
	total     int
	pairs     storage.PairingAudit
	newer     *error // set to the first record written by a newer ctxstore
}

func (v *sessionVerifier) message(e boltpage.Elem) {
	r := v.r
	if e.Bucket {
		r.AddProblem("record", v.name, 0, "nested bucket %q among messages", e.Key)
		return
	}
	r.Messages++
	seq, ok := layout.KeySeq(e.Key)
	env, err := layout.DecodeAt(v.name, e.Key, e.Value)
	if errors.Is(err, storage.ErrNewerFormat) {
		if *v.newer == nil {
			*v.newer = err
		}
		return
	}
	if err != nil {
		if !ok || seq == 0 || (v.meta != nil && seq > v.meta.LastSeq) || seq > implausibleSeq {
			// Its key is damaged too: the number it reads as is no seq.
			r.AddProblem("record", v.name, 0, "unreadable record under a damaged key")
			return
		}
		detail := strings.TrimPrefix(err.Error(), fmt.Sprintf("store: session %q seq %d: ", v.name, seq))
		r.AddProblem("record", v.name, seq, "%s", strings.TrimPrefix(detail, storage.ErrCorrupt.Error()+": "))
		return
	}
	msg, err := ctxstore.ParseMessage(env.Raw)
	if err != nil {
		r.AddProblem("record", v.name, seq, "stored JSON: %v", err)
		return
	}
	if msg.Role() != env.Role {
		r.AddProblem("record", v.name, seq, "record says role %q, its JSON %q", env.Role, msg.Role())
	}
	if seq <= v.lastSeq {
		r.AddProblem("order", v.name, seq, "after seq %d", v.lastSeq)
	}
	if env.Epoch < v.lastEp {
		r.AddProblem("order", v.name, seq, "epoch %d after epoch %d", env.Epoch, v.lastEp)
	}
	v.lastSeq, v.lastEp = max(v.lastSeq, seq), max(v.lastEp, env.Epoch)
	v.total++
	t := v.epochs[env.Epoch]
	if t == nil {
		t = &epochTally{}
		v.epochs[env.Epoch] = t
	}
	t.messages++
	t.tokens += env.Tokens
	t.bytes += int64(len(env.Raw))
	if v.meta != nil && env.Epoch == v.meta.Epoch {
		t.counters = layout.CountBy(t.counters, &env)
	}
	if v.epochList != nil {
		v.epochList.Message(r, seq, env.Epoch)
	}
	v.pairs.Add(r, env.Epoch, seq, env.CallIDs, env.ResultIDs)
}

// finish compares the tallies with the metadata and reports unanswered calls.
func (v *sessionVerifier) finish() {
	r := v.r
	v.pairs.Finish(r)
	m := v.meta
	if m == nil {
		r.AddProblem("meta", v.name, 0, "no readable metadata")
		return
	}
	if v.lastSeq > m.LastSeq {
		r.AddProblem("meta", v.name, 0, "last seq is %d, metadata says %d", v.lastSeq, m.LastSeq)
	}
	if v.total != m.Total {
		r.AddProblem("meta", v.name, 0, "%d messages stored, metadata counts %d", v.total, m.Total)
	}
	v.epochList.Finish(r)
	cur := v.epochs[m.Epoch]
	if cur == nil {
		cur = &epochTally{}
	}
	if cur.messages != m.Messages || cur.tokens != m.Tokens || cur.bytes != m.Bytes {
		r.AddProblem("meta", v.name, 0, "current epoch %d holds %d messages, %d tokens, %d bytes; metadata says %d, %d, %d",
			m.Epoch, cur.messages, cur.tokens, cur.bytes, m.Messages, m.Tokens, m.Bytes)
	}
	// The split by counter may leave out messages (written by a version
	// that did not keep it), never add any.
	split := 0
	for _, c := range m.Counters {
		split += c.Messages
	}
	for _, name := range slices.Sorted(maps.Keys(m.Counters)) {
		c, got := m.Counters[name], cur.counters[name]
		if c.Messages > got.Messages || c.Tokens > got.Tokens || split == m.Messages && c != got {
			r.AddProblem("meta", v.name, 0, "current epoch %d holds %d messages, %d tokens counted by %q; metadata says %d, %d",
				m.Epoch, got.Messages, got.Tokens, name, c.Messages, c.Tokens)
		}
	}
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
