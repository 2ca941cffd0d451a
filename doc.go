// Package ctxstore is the contract shared by every part of ctxstore: the
// conversation [Message], the [Manager] interface that both the in-memory
// (simple) and the durable (persistent) managers implement, the [Request]
// that asks for a view, and the small extension points [Estimator],
// [Summarizer] and [Hooks].
//
// A Message keeps the exact JSON bytes it was given. Nothing in ctxstore
// decodes a message into map[string]any and re-encodes it, so unknown keys,
// key order, number precision and escapes survive storage byte for byte.
//
// The stored history is never changed by compaction: GetMessages returns
// every message of the current epoch as it was added, while
// GetMessagesForRequest returns a view compacted to fit the token budget.
//
// docs/architecture.md shows how the packages fit together, docs/compaction.md
// how a view is made.
package ctxstore
