package storage

import (
	"context"
	"errors"
)

// Originals holds the stored bytes of some of a session's messages, read
// before they are erased. Rewind and fork copy messages byte for byte, and
// an erase by seq leaves those copies: Copies finds them afterwards.
type Originals struct {
	raw map[string]bool
}

// ReadOriginals reads the stored bytes of session's messages with the
// given seqs, in every epoch not purged.
func ReadOriginals(ctx context.Context, e Engine, session string, seqs []uint64) (Originals, error) {
	want := map[uint64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	o := Originals{raw: map[string]bool{}}
	err := eachMessage(ctx, e, session, func(ent Entry) {
		if want[ent.Seq] {
			o.raw[string(ent.Raw)] = true
		}
	})
	return o, err
}

// Copies is where a session holds byte-for-byte copies of erased messages.
type Copies struct {
	Session string
	Seqs    []uint64
}

// Copies returns the messages whose stored bytes are one of o's, in
// session (a rewind copies within it), in the session it was forked from
// and in the sessions forked from it, each session once, session first:
// what an erase of o's messages left. A related session purged meanwhile
// is passed over.
func (o Originals) Copies(ctx context.Context, e Engine, session string) ([]Copies, error) {
	if len(o.raw) == 0 {
		return nil, nil
	}
	related := []string{session}
	if l, ok, err := LineageOf(ctx, e, session); err != nil {
		return nil, err
	} else if ok {
		related = append(related, l.Parent)
	}
	infos, err := e.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		if l, ok, err := LineageOf(ctx, e, info.Name); err != nil {
			return nil, err
		} else if ok && l.Parent == session && info.Name != session {
			related = append(related, info.Name)
		}
	}
	var out []Copies
	for _, name := range related {
		c := Copies{Session: name}
		err := eachMessage(ctx, e, name, func(ent Entry) {
			if o.raw[string(ent.Raw)] {
				c.Seqs = append(c.Seqs, ent.Seq)
			}
		})
		if errors.Is(err, ErrNotFound) {
			continue // a parent since purged
		}
		if err != nil {
			return nil, err
		}
		if len(c.Seqs) > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// eachMessage calls fn with every message of session, every epoch not
// purged.
func eachMessage(ctx context.Context, e Engine, session string, fn func(Entry)) error {
	info, err := e.Session(ctx, session)
	if err != nil {
		return err
	}
	for _, ep := range info.Epochs {
		if ep.Purged || ep.Messages == 0 {
			continue
		}
		for ent, err := range e.EpochMessages(ctx, session, ep.Epoch, ep.FirstSeq) {
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil {
				return err
			}
			fn(ent)
		}
	}
	return nil
}
