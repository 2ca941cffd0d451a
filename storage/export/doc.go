// Package export writes the sessions of any engine in ctxstore's export
// format and reads them back into any engine: a backup that moves between
// a file and PostgreSQL, and between versions. Write streams sessions out
// (all of them, or those named); Read imports an export, session by
// session, keeping every seq, epoch, time and token count (through the
// engine's storage.Importer). The command line's "ctxstore export" and
// "ctxstore import" are these two functions.
//
// The format, version 1, is JSON Lines (UTF-8, one JSON object per line,
// "\n" after every line). It carries sessions, their epochs and every
// message of every epoch losslessly: exporting, importing into a fresh
// store and exporting again gives the same bytes. Lines, in order:
//
//  1. The header, always first, which is how a reader recognises the format:
//
//     {"format":"ctxstore-export","version":1,"sessions":2}
//
//     "sessions" is the number of session records that follow. A reader
//     must refuse a version it does not know.
//
//  2. For each session, a session record followed immediately by exactly
//     "messages" message records, all epochs in seq order:
//
//     {"type":"session","name":"work","created":"2026-11-22T06:00:00.123456789Z",
//     "updated":"…","epoch":2,"last_seq":40,"messages":40,"title":"…",
//     "epochs":[{"epoch":1,"first_seq":1,"last_seq":30,"messages":30,"started":"…"},…]}
//
//     "epoch" is the current epoch (it may have no messages: a session that
//     was just cleared); "epochs" lists every epoch, a purged one with
//     "purged":true and no messages. Times are RFC 3339 with nanoseconds, in UTC.
//
//     {"type":"message","seq":1,"epoch":1,"time":"…","tokens":12,"message":{"role":"user","content":"hi"}}
//
//     "message" is the message's original JSON, byte for byte as it was
//     added (key order, number spelling and escapes included). A message
//     whose stored bytes are not one line of valid JSON (pretty-printed
//     input keeps its newlines) is carried as "message_base64" instead,
//     standard base64 of the exact bytes. "tokens" is the count stored
//     with the message and "counter" the name of the counter that made it
//     (absent when it was stored without one).
//
//     After the messages come the session's derived records, if any: what
//     managers computed from the messages and saved beside them (compaction
//     decisions, repairs of interrupted tool calls, transcript import
//     records), sorted by kind, then key:
//
//     {"type":"derived","kind":"repair","key":"00000000000000000042","value":{…}}
//
//     "value" is the record's bytes when they are one line of valid JSON,
//     else "value_base64". Only the kinds Kinds lists are carried.
//
//  3. The end record, always last; its absence means the export was cut
//     short:
//
//     {"type":"end","sessions":2,"messages":75}
//
// Writers stream: one session's messages are never held in memory together.
package export
