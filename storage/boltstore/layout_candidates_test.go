package boltstore

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"github.com/ctxstore/ctxstore/storage/storagetest"
	"go.etcd.io/bbolt"
)

// candidateSession is one session encoded as the store encodes it: its
// metadata and its envelopes.
type candidateSession struct {
	name string
	meta []byte
	envs [][]byte // with the session's name
	bare [][]byte // without it
}

func candidateSessions(b *testing.B, n int) []candidateSession {
	out := make([]candidateSession, n)
	for i, si := range storagetest.SmallSessions(n) {
		im, err := newImporter(si.Info)
		if err != nil {
			b.Fatal(err)
		}
		cs := candidateSession{name: si.Info.Name}
		for _, e := range si.Entries {
			env, err := im.add(e)
			if err != nil {
				b.Fatal(err)
			}
			v, err := layout.EncodeEnvelope(&env)
			if err != nil {
				b.Fatal(err)
			}
			env.Session = ""
			bare, err := layout.EncodeEnvelope(&env)
			if err != nil {
				b.Fatal(err)
			}
			cs.envs, cs.bare = append(cs.envs, v), append(cs.bare, bare)
		}
		m := im.finish()
		if cs.meta, err = layout.EncodeMeta(&m); err != nil {
			b.Fatal(err)
		}
		out[i] = cs
	}
	return out
}

// layoutCandidate writes a batch of sessions in one transaction; id is the
// first session's number in the file.
type layoutCandidate struct {
	name  string
	write func(tx *bbolt.Tx, batch []candidateSession, id uint64) error
}

var layoutCandidates = []layoutCandidate{
	// Format 1 and 2: a bucket per session with "meta", and "msgs" and
	// "derived" sub-buckets: never inlined.
	{"nested", func(tx *bbolt.Tx, batch []candidateSession, _ uint64) error {
		ss, err := tx.CreateBucketIfNotExists([]byte(layout.BucketSessions))
		if err != nil {
			return err
		}
		for _, cs := range batch {
			sb, err := ss.CreateBucket([]byte(cs.name))
			if err != nil {
				return err
			}
			if err := sb.Put([]byte(layout.KeyMeta), cs.meta); err != nil {
				return err
			}
			if _, err := sb.CreateBucket([]byte(layout.BucketDerived)); err != nil {
				return err
			}
			mb, err := sb.CreateBucket([]byte(layout.BucketMsgs))
			if err != nil {
				return err
			}
			mb.FillPercent = layout.MsgsFillPercent
			for j, v := range cs.envs {
				if err := mb.Put(layout.SeqKey(uint64(j+1)), v); err != nil {
					return err
				}
			}
		}
		return nil
	}},
	// A bucket per session without sub-buckets (meta, messages and derived
	// records told apart by a key prefix): bbolt inlines a small one in
	// its parent's page.
	{"inline", func(tx *bbolt.Tx, batch []candidateSession, _ uint64) error {
		ss, err := tx.CreateBucketIfNotExists([]byte(layout.BucketSessions))
		if err != nil {
			return err
		}
		for _, cs := range batch {
			sb, err := ss.CreateBucket([]byte(cs.name))
			if err != nil {
				return err
			}
			if err := sb.Put([]byte{0}, cs.meta); err != nil {
				return err
			}
			for j, v := range cs.envs {
				if err := sb.Put(append([]byte{1}, layout.SeqKey(uint64(j+1))...), v); err != nil {
					return err
				}
			}
		}
		return nil
	}},
	// raft-boltdb style: flat buckets; "sessions" name -> id + meta,
	// "msgs" be64(id) be64(seq) -> layout.Envelope (with the session's name, for
	// salvage).
	{"flat", flatWrite(false)},
	// The same without the name in the layout.Envelope: what the name costs.
	{"flat-bare", flatWrite(true)},
	// Flat, with order-preserving compact numbers in keys (a length byte,
	// then the number's big-endian bytes without leading zeros) and the
	// name in the first layout.Envelope of each session only.
	{"flat-compact", func(tx *bbolt.Tx, batch []candidateSession, id uint64) error {
		ss, err := tx.CreateBucketIfNotExists([]byte(layout.BucketSessions))
		if err != nil {
			return err
		}
		ms, err := tx.CreateBucketIfNotExists([]byte(layout.BucketMsgs))
		if err != nil {
			return err
		}
		ss.FillPercent, ms.FillPercent = layout.MsgsFillPercent, layout.MsgsFillPercent
		for i, cs := range batch {
			sid := layout.AppendUint(nil, id+uint64(i))
			if err := ss.Put([]byte(cs.name), append(sid, cs.meta...)); err != nil {
				return err
			}
			for j := range cs.envs {
				v := cs.bare[j]
				if j == 0 {
					v = cs.envs[j]
				}
				if err := ms.Put(layout.AppendUint(layout.AppendUint(nil, id+uint64(i)), uint64(j+1)), v); err != nil {
					return err
				}
			}
		}
		return nil
	}},
}

func flatWrite(bare bool) func(tx *bbolt.Tx, batch []candidateSession, id uint64) error {
	return func(tx *bbolt.Tx, batch []candidateSession, id uint64) error {
		ss, err := tx.CreateBucketIfNotExists([]byte(layout.BucketSessions))
		if err != nil {
			return err
		}
		ms, err := tx.CreateBucketIfNotExists([]byte(layout.BucketMsgs))
		if err != nil {
			return err
		}
		ss.FillPercent, ms.FillPercent = layout.MsgsFillPercent, layout.MsgsFillPercent
		for i, cs := range batch {
			sid := binary.AppendUvarint(nil, id+uint64(i))
			if err := ss.Put([]byte(cs.name), append(sid, cs.meta...)); err != nil {
				return err
			}
			envs := cs.envs
			if bare {
				envs = cs.bare
			}
			for j, v := range envs {
				k := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, id+uint64(i)), uint64(j+1))
				if err := ms.Put(k, v); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// BenchmarkLayoutCandidates: the bytes of file in use per session and the time to
// write N two-message sessions (CTXSTORE_BENCH_SESSIONS, 10,000 by
// default) in transactions of 1,000 sessions, fsynced, for candidate
// layouts of the next format, on bbolt directly with the store's own
// encodings and page size, in one run. The design measurement behind
// format 3: formats 1 and 2 wrote "nested", format 3 writes "flat-compact"
// with the name in every envelope and a compact metadata record.
func BenchmarkLayoutCandidates(b *testing.B) {
	n := 10_000
	if v := os.Getenv("CTXSTORE_BENCH_SESSIONS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	sessions := candidateSessions(b, n)
	for b.Loop() {
		for _, lc := range layoutCandidates {
			for _, ps := range []int{4096, layout.PageSize} {
				path := filepath.Join(b.TempDir(), "c.db")
				db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: ps})
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				for i := 0; i < n; i += 1000 {
					batch := sessions[i:min(i+1000, n)]
					if err := db.Update(func(tx *bbolt.Tx) error { return lc.write(tx, batch, uint64(i+1)) }); err != nil {
						b.Fatal(err)
					}
				}
				took := time.Since(t0)
				// The pages in use: bbolt grows the file ahead of them (to
				// the next power of two below 16 MiB, by 16 MiB above).
				var used int64
				db.View(func(tx *bbolt.Tx) error { used = tx.Size(); return nil })
				db.Close()
				label := lc.name + "-" + strconv.Itoa(ps/1024) + "k"
				b.ReportMetric(float64(used)/float64(n), label+"-bytes/session")
				b.ReportMetric(took.Seconds()*1e6/float64(n), label+"-µs/session")
			}
		}
	}
	var meta, env int
	for _, cs := range sessions {
		meta += len(cs.meta)
		for _, v := range cs.envs {
			env += len(v)
		}
	}
	b.ReportMetric(float64(meta)/float64(n), "meta-bytes/session")
	b.ReportMetric(float64(env)/float64(n), "envelope-bytes/session")
}
