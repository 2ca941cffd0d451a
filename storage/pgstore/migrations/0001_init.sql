-- Every key leads with the session, so a sharded PostgreSQL (Citus) can
-- distribute every table by it. Names, kinds and keys are bytea: they are
-- the caller's bytes, compared bytewise, never collated.

-- One row per session name: its metadata, and the row every write to the
-- session locks. A purged session keeps its row (live = false) as the
-- tombstone whose epoch and last_seq a new session of that name continues
-- after.
CREATE TABLE {{schema}}.sessions (
    name          bytea   PRIMARY KEY,
    live          boolean NOT NULL,
    created       bigint  NOT NULL, -- Unix nanoseconds
    updated       bigint  NOT NULL,
    epoch         bigint  NOT NULL, -- the current epoch
    epoch_seq     bigint  NOT NULL, -- its first seq
    epoch_started bigint  NOT NULL,
    last_seq      bigint  NOT NULL, -- the highest seq ever assigned
    messages      integer NOT NULL, -- current epoch
    tokens        bigint  NOT NULL,
    bytes         bigint  NOT NULL,
    total         integer NOT NULL, -- every epoch
    title         text    NOT NULL,
    pinned        bigint[] NOT NULL,
    first_user    bigint  NOT NULL
);

-- Epochs left by Clear (the current one lives in sessions).
CREATE TABLE {{schema}}.epochs (
    session   bytea   NOT NULL,
    epoch     bigint  NOT NULL,
    first_seq bigint  NOT NULL,
    last_seq  bigint  NOT NULL,
    messages  integer NOT NULL,
    started   bigint  NOT NULL,
    purged    boolean NOT NULL,
    PRIMARY KEY (session, epoch)
);

-- The messages: the original JSON byte for byte (bytea, never jsonb, which
-- rewrites numbers, key order and whitespace).
CREATE TABLE {{schema}}.messages (
    session    bytea   NOT NULL,
    seq        bigint  NOT NULL,
    epoch      bigint  NOT NULL,
    time       bigint  NOT NULL,
    role       text    NOT NULL,
    tokens     integer NOT NULL,
    counter    text    NOT NULL,
    call_ids   text[]  NOT NULL,
    result_ids text[]  NOT NULL,
    raw        bytea   NOT NULL,
    append_key bytea,
    PRIMARY KEY (session, seq)
);

-- The first message of each append carries the append's idempotency key,
-- so that a retry after a commit of unknown outcome finds it instead of
-- storing the messages twice. The keys go with their messages.
CREATE UNIQUE INDEX messages_append_key ON {{schema}}.messages (session, append_key)
    WHERE append_key IS NOT NULL;

CREATE TABLE {{schema}}.derived (
    session bytea NOT NULL,
    kind    bytea NOT NULL,
    key     bytea NOT NULL,
    value   bytea NOT NULL,
    PRIMARY KEY (session, kind, key)
);
