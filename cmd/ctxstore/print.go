package main

import (
	"time"

	"github.com/ctxstore/ctxstore/internal/textsafe"
	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/export"
)

// termSafe makes stored text safe to print on a terminal (textsafe.Escape).
func termSafe(s string, multiline bool) string { return textsafe.Escape(s, multiline) }

// cut shortens s to about max characters (textsafe.Cut).
func cut(s string, max int) string { return textsafe.Cut(s, max) }

// sessionJSON is a session in --json output.
type sessionJSON struct {
	Name     string    `json:"name"`
	Title    string    `json:"title"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Epoch    uint64    `json:"epoch"`
	Messages int       `json:"messages"`
	tokensJSON
	Bytes         int64                `json:"bytes"`
	TotalMessages int                  `json:"total_messages"`
	LastSeq       uint64               `json:"last_seq"`
	Epochs        []export.EpochRecord `json:"epochs"`
	// ForkedFrom is where a fork came from (see storage.Fork).
	ForkedFrom *forkedJSON `json:"forked_from,omitempty"`
}

// forkedJSON is a fork's lineage in --json output.
type forkedJSON struct {
	Session string `json:"session"`
	Epoch   uint64 `json:"epoch"`
	Seq     uint64 `json:"seq"`
	// ParentPurged says the parent was purged since (Lineage.ParentGone).
	ParentPurged bool `json:"parent_purged,omitempty"`
}

func toSessionJSON(info storage.SessionInfo, split storage.Split, forked *storage.Lineage) sessionJSON {
	s := sessionJSON{
		Name: info.Name, Title: info.Title, Created: info.Created.UTC(), Updated: info.Updated.UTC(),
		Epoch: info.Epoch, Messages: info.Messages, tokensJSON: splitJSON(split), Bytes: info.Bytes,
		TotalMessages: info.TotalMessages, LastSeq: info.LastSeq, Epochs: export.EpochRecords(info.Epochs),
	}
	if forked != nil {
		s.ForkedFrom = &forkedJSON{Session: forked.Parent, Epoch: forked.Epoch, Seq: forked.Seq, ParentPurged: forked.ParentGone}
	}
	return s
}
