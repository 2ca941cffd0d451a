package pgstore

import (
	"slices"
	"time"

	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/storage"
)

// queries are the statements, with the schema filled in.
type queries struct {
	placeholder, lock, saveMeta, appendFast, notifyAfter, insertMessages, insertMany, recall string
	sessionInfo, sessions, sessionsPage, readFwd, readBack, get, splitCounters               string
	// list are ListSessions' queries, by order.
	list [len(listColumn)]string
}

const metaCols = `live, created, updated, epoch, epoch_seq, epoch_started, last_seq, messages, tokens, bytes, total, title, pinned, first_user`

// readCols are metaCols and the columns a write leaves to their default
// when it creates a row: what reads scan (scanArgs).
const readCols = metaCols + `, erasures`

const msgCols = `session, seq, epoch, time, role, tokens, counter, call_ids, result_ids, raw`

func newQueries(s string) queries {
	// The closed epochs of session ses as six arrays, in one index scan.
	epochs := func(ses string) string {
		return `LEFT JOIN LATERAL (SELECT coalesce(array_agg(e.epoch ORDER BY e.epoch), '{}'),
			coalesce(array_agg(e.first_seq ORDER BY e.epoch), '{}'), coalesce(array_agg(e.last_seq ORDER BY e.epoch), '{}'),
			coalesce(array_agg(e.messages ORDER BY e.epoch), '{}'), coalesce(array_agg(e.started ORDER BY e.epoch), '{}'),
			coalesce(array_agg(e.purged ORDER BY e.epoch), '{}')
			FROM ` + s + `.epochs e WHERE e.session = ` + ses + `) ep ON true`
	}
	q := queries{
		placeholder: `INSERT INTO ` + s + `.sessions (name, ` + metaCols + `)
			VALUES ($1, false, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, '', '{}', 0) ON CONFLICT (name) DO NOTHING`,
		// The rows of sessions $1, locked in name order.
		lock: `SELECT name, ` + readCols + `, ep.* FROM ` + s + `.sessions s ` + epochs("s.name") + `
			WHERE name = ANY($1) ORDER BY name FOR UPDATE OF s`,
		saveMeta: `UPDATE ` + s + `.sessions SET live = $2, created = $3, updated = $4, epoch = $5, epoch_seq = $6,
			epoch_started = $7, last_seq = $8, messages = $9, tokens = $10, bytes = $11, total = $12, title = $13,
			pinned = $14, first_user = $15, erasures = $16 WHERE name = $1`,
		insertMessages: `INSERT INTO ` + s + `.messages (` + msgCols + `, append_key)
			SELECT $1, u.seq, u.epoch, u.time, u.role, u.tokens, u.counter, u.calls::text[], u.results::text[], u.raw,
				CASE WHEN u.ord = 1 THEN $11::bytea END
			FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::int[], $7::text[], $8::text[], $9::text[], $10::bytea[])
				WITH ORDINALITY AS u(seq, epoch, time, role, tokens, counter, calls, results, raw, ord)`,
		// Messages of any sessions, without append keys.
		insertMany: `INSERT INTO ` + s + `.messages (` + msgCols + `)
			SELECT u.session, u.seq, u.epoch, u.time, u.role, u.tokens, u.counter, u.calls::text[], u.results::text[], u.raw
			FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::int[], $7::text[], $8::text[], $9::text[], $10::bytea[])
				AS u(session, seq, epoch, time, role, tokens, counter, calls, results, raw)`,
		appendFast: `WITH s AS (
				UPDATE ` + s + `.sessions SET last_seq = last_seq + $2, messages = messages + $2, total = total + $2,
					tokens = tokens + $3, bytes = bytes + $4,
					pinned = pinned || ARRAY(SELECT last_seq + o FROM unnest($5::bigint[]) o),
					first_user = CASE WHEN first_user = 0 AND $6::bigint > 0 THEN last_seq + $6::bigint ELSE first_user END,
					title = CASE WHEN title = '' THEN $7 ELSE title END, updated = $8
				WHERE name = $1 AND live
				RETURNING last_seq - $2 AS base, epoch
			), m AS (
				INSERT INTO ` + s + `.messages (` + msgCols + `, append_key)
				SELECT $1, s.base + u.ord, s.epoch, $8, u.role, u.tokens, u.counter, u.calls::text[], u.results::text[], u.raw,
					CASE WHEN u.ord = 1 THEN $15::bytea END
				FROM s, unnest($9::text[], $10::int[], $11::text[], $12::text[], $13::text[], $14::bytea[])
					WITH ORDINALITY AS u(role, tokens, counter, calls, results, raw, ord)
			)
			SELECT epoch, base + 1 FROM s`,
		// A notification takes a transaction id, so its transaction would
		// wait for a WAL flush of its own, holding the notify lock: it
		// commits asynchronously (it changes no data; see notifySQL).
		notifyAfter: `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, encode(name, 'hex') || ' ' || last_seq || ' ' || epoch) FROM ` + s + `.sessions WHERE name = ANY($2) AND live`,
		recall:      `SELECT epoch, seq FROM ` + s + `.messages WHERE session = $1 AND append_key = $2`,
		sessionInfo: `SELECT name, ` + readCols + `, ep.* FROM ` + s + `.sessions s ` + epochs("s.name") + ` WHERE name = $1 AND live`,
		sessions:    `SELECT name, ` + readCols + `, ep.* FROM ` + s + `.sessions s ` + epochs("s.name") + ` WHERE live ORDER BY name`,
		// The sessions after $1 ($2: from the first), $3 at most.
		sessionsPage: `SELECT name, ` + readCols + `, ep.* FROM ` + s + `.sessions s ` + epochs("s.name") + `
			WHERE live AND (name > $1 OR $2) ORDER BY name LIMIT $3`,
		readFwd: `SELECT ` + msgCols + ` FROM ` + s + `.messages
			WHERE session = $1 AND seq >= $2 AND seq <= $3 AND epoch = $4 ORDER BY seq LIMIT $5`,
		readBack: `SELECT ` + msgCols + ` FROM ` + s + `.messages
			WHERE session = $1 AND seq < $2 AND seq >= $3 AND epoch = $4 ORDER BY seq DESC LIMIT $5`,
		get: `SELECT ` + msgCols + ` FROM ` + s + `.messages WHERE session = $1 AND seq = ANY($2)`,
		splitCounters: `SELECT counter, count(*), coalesce(sum(tokens), 0) FROM ` + s + `.messages
			WHERE session = $1 AND seq >= $2 AND seq <= $3 AND epoch = $4 GROUP BY counter`,
	}
	for o := range q.list {
		q.list[o] = listQuery(s, epochs("s.name"), storage.ListOrder(o))
	}
	return q
}

// meta is a session's row. A row that is not live is a tombstone (or the
// placeholder a write takes its lock on): a session created under its name
// continues after its epoch and last seq.
type meta struct {
	live                           bool
	created, updated, epochStarted int64
	epoch, epochSeq, lastSeq       int64
	messages, total                int32
	tokens, bytes                  int64
	title                          string
	pinned                         []int64
	firstUser                      int64
	erasures                       int64               // erases that changed its messages
	closed                         []storage.EpochInfo // epochs left by Clear
	changed                        bool                // to be saved
}

// scanArgs are the destinations of readCols, then the closed epochs' arrays.
func (m *meta) scanArgs(ep *epochArrays) []any {
	return []any{&m.live, &m.created, &m.updated, &m.epoch, &m.epochSeq, &m.epochStarted, &m.lastSeq,
		&m.messages, &m.tokens, &m.bytes, &m.total, &m.title, &m.pinned, &m.firstUser, &m.erasures,
		&ep.epoch, &ep.first, &ep.last, &ep.messages, &ep.started, &ep.purged}
}

type epochArrays struct {
	epoch, first, last, started []int64
	messages                    []int32
	purged                      []bool
}

func (ep *epochArrays) infos() []storage.EpochInfo {
	out := make([]storage.EpochInfo, len(ep.epoch))
	for i := range out {
		out[i] = storage.EpochInfo{Epoch: uint64(ep.epoch[i]), FirstSeq: uint64(ep.first[i]), LastSeq: uint64(ep.last[i]),
			Messages: int(ep.messages[i]), Started: unixTime(ep.started[i]), Purged: ep.purged[i]}
	}
	return out
}

// saveArgs are the parameters of saveMeta.
func (m *meta) saveArgs(name []byte) []any {
	return []any{name, m.live, m.created, m.updated, m.epoch, m.epochSeq, m.epochStarted, m.lastSeq,
		m.messages, m.tokens, m.bytes, m.total, m.title, m.pinned, m.firstUser, m.erasures}
}

// revive makes a tombstone a new, empty session created at now, after the
// tombstone's epoch and last seq.
func (m *meta) revive(now int64) {
	if m.live {
		return
	}
	*m = meta{live: true, created: now, updated: now, epoch: m.epoch + 1, epochSeq: m.lastSeq + 1,
		epochStarted: now, lastSeq: m.lastSeq, pinned: []int64{}, changed: true}
}

// add accounts for one appended message of the current epoch.
func (m *meta) add(seq int64, r storage.Record, now int64) {
	m.lastSeq, m.updated = seq, now
	m.messages++
	m.total++
	m.tokens += int64(r.Tokens)
	m.bytes += int64(r.Message.Size())
	m.changed = true
	switch r.Message.Role() {
	case ctxstore.RoleSystem, ctxstore.RoleDeveloper:
		m.pinned = append(m.pinned, seq)
	case ctxstore.RoleUser:
		if r.Message.IsToolResult() {
			break
		}
		if m.firstUser == 0 {
			m.firstUser = seq
		}
		if m.title == "" {
			m.title = storage.Title(r.Message.Text())
		}
	}
}

// clear closes the current epoch and starts an empty one; it returns the
// closed epoch, to be stored.
func (m *meta) clear(now int64) storage.EpochInfo {
	old := storage.EpochInfo{Epoch: uint64(m.epoch), FirstSeq: uint64(m.epochSeq), LastSeq: uint64(m.lastSeq),
		Messages: int(m.messages), Started: unixTime(m.epochStarted)}
	m.closed = append(m.closed, old)
	m.epoch++
	m.epochSeq = m.lastSeq + 1
	m.epochStarted, m.updated = now, now
	m.messages, m.tokens, m.bytes = 0, 0, 0
	m.pinned, m.firstUser = []int64{}, 0
	m.changed = true
	return old
}

// info is the public form of m; a tombstone is shown as the session a
// write would create at now.
func (m *meta) info(name string, now int64) storage.SessionInfo {
	v := *m
	v.revive(now)
	si := storage.SessionInfo{
		Name: name, Created: unixTime(v.created), Updated: unixTime(v.updated),
		Epoch: uint64(v.epoch), EpochStartSeq: uint64(v.epochSeq), LastSeq: uint64(v.lastSeq),
		Messages: int(v.messages), Tokens: int(v.tokens), Bytes: v.bytes, TotalMessages: int(v.total),
		Title: v.title, FirstUserSeq: uint64(v.firstUser), Erasures: uint64(v.erasures),
	}
	for _, p := range v.pinned {
		si.PinnedSeqs = append(si.PinnedSeqs, uint64(p))
	}
	si.Epochs = append(slices.Clone(v.closed), storage.EpochInfo{Epoch: uint64(v.epoch), FirstSeq: uint64(v.epochSeq),
		LastSeq: uint64(v.lastSeq), Messages: int(v.messages), Started: unixTime(v.epochStarted)})
	return si
}

// unixTime is the inverse of Time.UnixNano, in UTC.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
