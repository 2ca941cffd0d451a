package boltstore

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"
	"go.etcd.io/bbolt"
)

// fileMsgs returns the messages of session name in a transaction on a
// store file opened with bbolt directly, as a test edits it.
func fileMsgs(t *testing.T, tx *bbolt.Tx, name string) *layout.Msgs {
	t.Helper()
	id, _, err := getSession(tx, name)
	if err != nil {
		t.Fatal(err)
	}
	return sessionMsgs(tx, id)
}

// editMeta rewrites the metadata of session name in a transaction on a
// store file opened with bbolt directly.
func editMeta(t *testing.T, tx *bbolt.Tx, name string, fn func(*layout.Meta)) {
	t.Helper()
	id, m, err := getSession(tx, name)
	if err != nil {
		t.Fatal(err)
	}
	fn(&m)
	if err := putRecord(tx, name, id, &m); err != nil {
		t.Fatal(err)
	}
}
