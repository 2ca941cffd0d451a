-- The search index, derived from the messages: searches fill it, catching
-- up from search_marks (every message of a session up to seq is indexed)
-- before they answer; Purge and PurgeEpoch delete what they delete here
-- too. Dropping both tables' rows loses nothing: the next search indexes
-- the log again. terms holds the lower-case terms ctxstore's tokenizer
-- makes (identifier parts, CJK character pairs), as lexemes with positions,
-- so the server's own GIN index and ranking need no extension.
CREATE TABLE {{schema}}.search_docs (
    session bytea   NOT NULL,
    seq     bigint  NOT NULL,
    epoch   bigint  NOT NULL,
    time    bigint  NOT NULL,
    role    text    NOT NULL,
    tools   text[]  NOT NULL,
    terms   tsvector NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE INDEX search_docs_terms ON {{schema}}.search_docs USING gin (terms);

CREATE TABLE {{schema}}.search_marks (
    session bytea  PRIMARY KEY,
    seq     bigint NOT NULL
);
