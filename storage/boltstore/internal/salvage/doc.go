// Package salvage rescues what a damaged bbolt store file still holds. It
// reads the file page by page with boltpage (never through bbolt, so a cut
// or scribbled file cannot crash it), reads the write-ahead log beside it
// with wal, and writes every intact session into a new store through the
// engine's import path (ImportSession and PutDerived), as any client would:
// it is no second writer of the file format.
//
// The engine asks for a salvage with Run, handing it an Engine: how to
// create the new store, and how the finished copy takes on the source's
// identity. The report (Report) says what was
// recovered, skipped and missing, session by session.
//
// docs/architecture.md places it among the engine's rooms;
// docs/performance.md has the memory figures of its two passes.
package salvage
