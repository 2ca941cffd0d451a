-- How many erases changed each session's messages (SessionInfo.Erasures):
-- a manager holding the session in another process reads it again when the
-- count moves, as the bbolt engine's do.
ALTER TABLE {{schema}}.sessions ADD COLUMN erasures bigint NOT NULL DEFAULT 0;
