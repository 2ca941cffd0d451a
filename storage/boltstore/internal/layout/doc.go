// Package layout is the bbolt engine's file layout: the buckets and keys of a
// ctxstore file, and the values stored under them: message envelopes (a
// message's bytes and what is read without parsing it), session metadata,
// and the tombstones purged sessions leave. The engine, its write-ahead log
// and salvage all read and write these values through it.
//
// layout.go describes the layout; docs/engines.md says what the engine
// promises about it.
package layout
