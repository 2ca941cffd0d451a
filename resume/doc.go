// Package resume brings a session back: it finds Amplifier session
// directories, ingests a legacy context-messages.jsonl into the store once,
// opens the session with a persistent.Manager and repairs an interrupted
// tool-call tail, and says what it did in a Report.
//
// # Where things live
//
// Amplifier keeps a session in ~/.amplifier/projects/<slug>/sessions/<id>/;
// the reference context-persistent module appends every message to
// context-messages.jsonl there. resume reads that file and never writes it.
// The store file is Options.DBPath when set (one file for many sessions, the
// CLI's default database for example); otherwise it is ctxstore.db in the
// session directory, so a session directory stays self-contained. Either
// way the store's session name is the Amplifier session id.
//
// # Ingesting once
//
// The JSONL is ingested only into a session that holds no messages yet, and
// an ingest record (derived kind "import", keyed by the JSONL's path) is
// saved beside it, so resuming again never ingests twice; a session that
// already has messages is authoritative and its JSONL is ignored. An
// ingest cut short by a crash is continued on the next resume, after
// checking that what is stored is the JSONL's beginning (if it is not,
// the store stands and the ingest is recorded as abandoned); two processes
// resuming the same session at once ingest it once (the record names the
// ingesting process and is renewed after every batch). Blank
// lines are skipped; a line that is not a valid message is skipped and
// reported with its 1-based line number and the reason. Messages keep their
// bytes exactly, extra keys such as "timestamp" included.
package resume
