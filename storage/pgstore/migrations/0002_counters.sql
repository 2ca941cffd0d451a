-- The counter that made every token count of a session's current epoch
-- (Record.Counter; '' for counts stored without a name), or NULL when
-- several did, or when the epoch held messages before this column existed:
-- then which counters counted them is known only by reading them. A total
-- is never added up across counters, and with this `ls` need not read the
-- messages of a session one counter counted to tell.
ALTER TABLE {{schema}}.sessions ADD COLUMN counter text;
