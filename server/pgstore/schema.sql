-- idem's PostgreSQL store for the server middleware, version 3. {{schema}} is the
-- schema Options.Schema names (it may be shared with journal/pgjournal: every name
-- here starts with server_). Applied by Migrate, once, under an advisory lock.

-- One row per live idempotency record, keyed by server.Scope.ID().
CREATE TABLE IF NOT EXISTS {{schema}}.server_records (
    scope        text        PRIMARY KEY,  -- Scope.ID(): hex SHA-256 of the four fields
    fingerprint  text        NOT NULL,     -- the claiming request's
    token        text,                     -- the holder's fencing token; once done, the completer's
    lease_until  timestamptz,              -- the holder's lease, database clock; NULL once done
    expires_at   timestamptz NOT NULL,     -- the row counts as absent from then on
    status       integer,                  -- the stored response (NULL while in progress)
    header       bytea,                    -- its header fields (header.go's encoding)
    body         bytea,
    unreplayable text                      -- Response.Unreplayable; '' when replayable
);

-- Expired rows, oldest first: what Prune deletes in batches.
CREATE INDEX IF NOT EXISTS server_records_expires_at ON {{schema}}.server_records (expires_at);

-- Version 1 drew fencing tokens from a sequence; since version 2 the caller mints them
-- (server.NewToken), so that a call whose reply was lost is recognised when repeated.
DROP SEQUENCE IF EXISTS {{schema}}.server_tokens;

-- Tokens that Release found nothing for (version 3): a claim with one of them, delayed in
-- the network past its own clean-up, is refused rather than make a record no one runs.
CREATE TABLE IF NOT EXISTS {{schema}}.server_released (
    scope      text        NOT NULL,
    token      text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, token)
);
