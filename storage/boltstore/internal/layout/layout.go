package layout

// File layout (format version 2).
//
// Version 2 is version 1 with the write-ahead log (wal.go) and the identity
// binding the two: a file of version 2 may hold acknowledged appends in its
// log that version 1 readers cannot see, so they refuse it (their check of
// the version). A file of version 1 is migrated by the first open that may
// write: the new version and, if it has none, an identity, in one
// transaction.
//
// One bbolt file holds many sessions. Keys of message buckets are 8-byte
// big-endian sequence numbers, so bbolt's byte order is numeric order and an
// append always lands on the right-most leaf (the raft-boltdb layout).
//
//	"ctxstore"                          top-level bucket: store-wide values
//	    "format"  -> format version as decimal text (FormatVersion)
//	    "wal"     -> the database's identity and how far its log is applied
//	              (id, generation, offset; see wal.go)
//	    "purged"  bucket: <session name bytes> -> msgpack Tombstone
//	              (last seq and epoch of a purged session, nothing else)
//	"sessions"                          top-level bucket: one sub-bucket per session
//	    <session name bytes>            bucket of one session
//	        "meta"    -> msgpack Meta (counts, epochs, title, pinned seqs)
//	        "msgs"    bucket: be64(seq) -> msgpack Envelope, all epochs together
//	        "derived" bucket: one sub-bucket per kind
//	            <kind> bucket: <key bytes> -> value bytes (opaque to the store)
//
// Seqs are per session, start at 1, and increase strictly across epochs; a
// seq is never reused, even after PurgeEpoch or Purge-then-recreate of the
// epoch's messages. An epoch's messages are therefore one contiguous key
// range of "msgs", and its bounds are in Meta.Epochs. Purge leaves
// a Tombstone under "ctxstore"/"purged" so that a session recreated under
// the same name continues after the purged one's last seq and epoch:
// a process still holding the old session's seqs or epoch in memory sees
// the change instead of mistaking the new session for the old. The one
// exception is ImportSession, which restores an export's own numbers; the
// session's creation time then tells it apart.
//
// The Envelope is a msgpack array (not a map: the field names would cost
// more than the fields) of envelopeFields elements, in this order:
//
//	0 version   uint   (EnvelopeVersion)
//	1 seq       uint   (equals the key)
//	2 epoch     uint
//	3 time      int    (append time, Unix nanoseconds)
//	4 role      string
//	5 tokens    int    (the caller's estimate)
//	6 call ids  array of string (tool calls this message makes), nil when none
//	7 result ids array of string (tool_call_id / tool_result ids), nil when none
//	8 raw       bin    (the original JSON bytes, exactly as given)
//	9 session   string (the session's name; version 2 on)
//	10 counter  string (name of the counter that made tokens; optional,
//	            absent in envelopes written before counts were tagged)
//
// Version 1 envelopes have the first 9 elements and are still read. The
// session name costs a few bytes per message and lets Salvage put messages
// back in their session when the pages naming it are lost. A decoder accepts
// more elements than it knows (later versions may add fields at the end) but
// never fewer than envelopeFields.
//
// Meta is a msgpack map with short keys so fields can be added; it is
// rewritten in the same transaction as every append, Clear and PurgeEpoch, so
// Sessions and Session never read message bodies.
const (
	// FormatVersion is the layout version stored under "ctxstore"/"format".
	// A file of a newer version is refused with ErrNewerFormat; one of an
	// older version is migrated when opened for writing.
	FormatVersion = 3
	// EnvelopeVersion is element 0 of the message envelopes this version
	// writes; it reads every version from 1 on.
	EnvelopeVersion = 2
)

// Bucket and key names, as constants so nothing package-level is mutable;
// verify and salvage use them too.
const (
	BucketStore  = "ctxstore"
	KeyFormat    = "format"
	BucketPurged = "purged"
	// BucketNames, BucketMessages and BucketDerivedRecords are the flat
	// buckets of format 3.
	BucketNames          = "names"
	BucketMessages       = "messages"
	BucketDerivedRecords = "derived"
	// BucketSessions and the names below it are format 1 and 2's nested
	// layout, read by the migration and by salvage of such files.
	BucketSessions = "sessions"
	KeyMeta        = "meta"
	BucketMsgs     = "msgs"
	BucketDerived  = "derived"
)

const (
	// envelopeFields is the number of elements of a version-1 Envelope,
	// the fewest a decoder accepts.
	envelopeFields = 9
	// EnvelopeFieldsV2 is the number of elements of a version-2 Envelope.
	EnvelopeFieldsV2 = 10
	// EnvelopeFieldsCounter is the number of elements of an Envelope that
	// names its counter. The field was added to version 2 at the end, where
	// older readers skip it, so files stay readable by older binaries.
	EnvelopeFieldsCounter = 11
	// SeqKeyLen is the length of a message key.
	SeqKeyLen = 8
	// MsgsFillPercent is the bbolt FillPercent of "msgs" buckets. Keys only
	// ever grow, so a split never needs room in the left page: filling
	// pages completely roughly halves the file compared with the default 0.5.
	MsgsFillPercent = 1.0
	// PageSize is the bbolt page size of new files (existing files keep
	// theirs). bbolt never splits a node of 4 keys or fewer, so with 4 KiB
	// pages and ~1 KiB messages a leaf holds 2-3 messages and overflows
	// into a second page: 16 KiB pages cut the file by about a third
	//, and cost little per commit (see doc.go).
	PageSize = 16384
	// AllocSize is how far past the pages in use bbolt grows a file
	// larger than this (bbolt's default is 16 MiB: a file of 40 MB in use
	// took up to 56). A growth costs an fsync, one per MiB written.
	AllocSize = 1 << 20
)
