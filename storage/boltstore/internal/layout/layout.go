package layout

// File layout (format version 3).
//
// Version 3 keeps every session in three flat buckets, keyed by a number
// the file gives each session, instead of a bucket per session: a bucket
// with sub-buckets is never inlined into its parent's page, so each session
// of versions 1 and 2 took a 16 KiB page or more however short it was
// (docs/performance.md has the figures). A session now costs about what its
// messages and its metadata cost, and short sessions share pages.
//
// Version 2 was version 1 with the write-ahead log (wal.go) and the identity
// binding the two. Builds of version 2 refuse a file of version 3 by their
// check of the version, naming it. A file of version 1 or 2 (the nested
// layout below) is upgraded by the first open that may write, and by
// Shrink: it is copied into the flat layout beside itself (the same
// sessions, numbered in name order; the envelopes byte for byte; the
// "ctxstore" bucket as it was, but for the version), the records of its log
// applied to the copy, and the copy synced and renamed over it under the
// exclusive locks of the log and the file. A crash leaves the old file and
// its log, or the new file and a log that continues it (migrate.go).
//
//	"ctxstore"                          top-level bucket: store-wide values
//	    "format"  -> format version as decimal text (FormatVersion)
//	    "wal"     -> the database's identity and how far its log is applied
//	              (id, generation, offset; see wal.go)
//	    "wal-predecessor" -> in a copy given an identity of its own (an
//	              upgraded file, a backup, a compacted copy): the same for
//	              the database it was copied from, whose log it holds up
//	              to there (internal/identity)
//	    "purged"  bucket: <session name bytes> -> msgpack Tombstone
//	              (last seq and epoch of a purged session, nothing else)
//	"names"                             top-level bucket: one record per session
//	    <session name bytes> -> uint(id) compact Meta
//	"messages"                          top-level bucket: every session's messages
//	    uint(id) uint(seq)   -> msgpack Envelope, all epochs together
//	"derived"                           top-level bucket: every derived record
//	    uint(id) uint(len(kind)) <kind> <key bytes> -> value (opaque to the store)
//
// uint(v) is AppendUint's form: a length byte (1 to 8), then v's big-endian
// bytes without leading zeros. A shorter number is a smaller one, so byte
// order is numeric order, and no number's form is a prefix of another's.
// A session's messages are therefore one contiguous key range of
// "messages", in seq order; an append lands on the right-most leaf of its
// session's range (of the whole bucket when it is the newest session's);
// an epoch is a contiguous range within it. Ids come from the "names"
// bucket's sequence and are never reused: Purge deletes the session's
// record and both its key ranges, and a session recreated under the name
// gets a new id. A commit that only adds keys past a flat bucket's last
// (a new session, the newest session's appends) fills its pages to 100%
// (MsgsFillPercent); one that writes between other keys (an older
// session's append, a record rewritten) splits pages in half, bbolt's
// default, so that they stay at least half full.
//
// Versions 1 and 2 kept each session in a bucket of its own (the nested
// layout, which the upgrade and Salvage still read):
//
//	"sessions"                          top-level bucket: one sub-bucket per session
//	    <session name bytes>            bucket of one session
//	        "meta"    -> msgpack Meta (a map with short keys)
//	        "msgs"    bucket: be64(seq) -> msgpack Envelope, all epochs together
//	        "derived" bucket: one sub-bucket per kind
//	            <kind> bucket: <key bytes> -> value bytes
//
// Seqs are per session, start at 1, and increase strictly across epochs; a
// seq is never reused, even after PurgeEpoch or Purge-then-recreate of the
// epoch's messages. An epoch's messages are therefore one contiguous key
// range, and its bounds are in Meta.Epochs. Purge leaves
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
// The session's record holds its Meta in a compact form: a msgpack array
// of what a short session needs, with what follows from the rest left out
// (metacompact.go):
//
//	0 created       int (Unix nanoseconds)
//	1 updated       int (nanoseconds after created)
//	2 epoch, 3 epoch start seq, 4 last seq   uint
//	5 messages, 6 tokens, 7 bytes, 8 total   int (7: of JSON)
//	9 title         string
//	10 first user seq uint
//	11 pinned seqs  array of uint, nil when none
//	12 epochs       array of [epoch, first, last, messages, started-created,
//	                purged], nil (or absent) when the list is the one epoch
//	                the fields above imply, started when the session was
//	                created
//	13 importing    bool, absent when false
//	14 counters     the counter's name when one counter made every message of
//	                the epoch, else an array of [name, messages, tokens];
//	                absent (or nil) when none is known
//	15 erasures     uint: how many erases changed the session's messages,
//	                absent when none did
//
// Elements 12 to 14 are written only up to the last one that is not
// empty; a decoder skips elements it does not know, so a later version may
// add some at the end. The record is rewritten in the same transaction as
// every append, Clear and PurgeEpoch, so listing sessions never reads a
// message. Versions 1 and 2 kept Meta as a msgpack map with short keys
// (EncodeMeta), which the upgrade reads.
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
	// MsgsFillPercent is the bbolt FillPercent of a commit that adds keys
	// only past a bucket's last: a split then never needs room in the left
	// page, and filling pages completely roughly halves the file compared
	// with the default 0.5.
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
