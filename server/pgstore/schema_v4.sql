-- idem's PostgreSQL store for the server middleware, version 4, applied by Migrate after
-- schema.sql (versions 1 to 3) on the same {{schema}}: a completion becomes a HOT update,
-- written in place on its page, with no new index entries.

-- The time from which Prune looks at a row: the expiry its Claim set, never changed
-- afterwards, so that it can be indexed without making the completion (which moves
-- expires_at) update an index. Prune still deletes a row only once expires_at has passed.
-- Rows from before version 4, or inserted by a version-3 instance during a rolling
-- upgrade, get '-infinity': Prune then judges them by expires_at alone.
ALTER TABLE {{schema}}.server_records ADD COLUMN IF NOT EXISTS prune_from timestamptz NOT NULL DEFAULT '-infinity';
CREATE INDEX IF NOT EXISTS server_records_prune_from ON {{schema}}.server_records (prune_from);
DROP INDEX IF EXISTS {{schema}}.server_records_expires_at;

-- Room on each page for the completed version of the rows a page holds (the response
-- they gain), so that it can be written beside the claimed one. Pages written from now on.
ALTER TABLE {{schema}}.server_records SET (fillfactor = 70);
