// Package verify checks a bbolt store file page by page: the tree's
// structure (with boltpage's bounds-checked reads, so damage is reported
// rather than crashing the process), every message record (it decodes,
// sits under its own seq, holds valid JSON of the role it names), the
// order of seqs and epochs, each session's metadata against its messages,
// tool-call pairing, and the tombstones of purged sessions. It reports into
// a storage.VerifyReport and never fixes.
//
// The engine's Verify brings the log into the file first and holds the
// file still while Pages and Tombstones run; docs/operations.md says how
// to read a report (ctxstore verify).
package verify
