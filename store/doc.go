// Package store is the former import path of package boltstore, ctxstore's
// embedded bbolt engine, kept so that programs written against it still
// compile and run unchanged. Every name here is the boltstore name of the
// same spelling and nothing more: the types are aliases (a [Store] is a
// [boltstore.Store]), the functions call boltstore's, and the error values
// are boltstore's own, so errors.Is matches either spelling. Files written
// through either path are the same files.
//
// Two names of the old package have no forward here, because boltstore no
// longer exports them: EnvelopeVersion (the message envelope's format is
// internal to the engine) and CompactFile (use [boltstore.Shrink], which
// takes the log's and the file's locks itself). [FormatVersion] is the
// layout version this build writes, which may be newer than the one the old
// package wrote.
//
// Deprecated: use package github.com/ctxstore/ctxstore/storage/boltstore
// instead; only the import path and the qualifier (boltstore. for store.)
// change.
package store
