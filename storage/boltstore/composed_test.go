package boltstore

import (
	"testing"

	"github.com/ctxstore/ctxstore/storage"
	"github.com/ctxstore/ctxstore/storage/storagetest"
)

// composedOnly is a Store showing only the required Engine and the
// capabilities no function composes (import, watch, verify, purging an
// epoch): storage's Append, Backward, Tail, Get,
// PutDerived and GetDerived then take their composed paths.
type composedOnly struct {
	storage.Engine
	storage.Importer
	storage.Watcher
	storage.Verifier
	storage.EpochPurger
}

// TestConformanceComposed runs the conformance suite with the functions of
// package storage composed over the required Engine alone, so the
// composed paths keep the contract the engines' own methods keep.
func TestConformanceComposed(t *testing.T) {
	storagetest.Run(t, wrappedOpener(func(st *Store) storage.Engine {
		return composedOnly{st, st, st, st, st}
	}))
}
