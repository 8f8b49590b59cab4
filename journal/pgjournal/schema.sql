-- idem's PostgreSQL journal, version 1. {{schema}} is the schema
-- Options.Schema names; every journal namespace (Options.Namespace) shares
-- these tables. Applied by Migrate, once, under an advisory lock.

CREATE TABLE IF NOT EXISTS {{schema}}.operations (
    namespace    text        NOT NULL,
    seq          bigint      GENERATED ALWAYS AS IDENTITY,
    key          text        NOT NULL,
    caller_key   boolean     NOT NULL,
    operation_id text,                      -- NULL: none
    state        smallint    NOT NULL,      -- journal.State: 1 pending, 2 settled, 3 expired, 4 failed
    record       jsonb       NOT NULL,      -- the rest of journal.Record (record.go)
    body         bytea,                     -- NULL once settled
    updated      timestamptz NOT NULL,      -- drives pruning
    epoch        bigint      NOT NULL DEFAULT 1, -- bumped when another instance takes the lease (fencing)
    holder       text,                      -- the Journal (instance) that leases the row
    leased_until timestamptz,               -- on the database's clock; NULL: not leased
    PRIMARY KEY (namespace, seq)
);

-- The operation ID and a caller's key are unique per namespace.
CREATE UNIQUE INDEX IF NOT EXISTS operations_operation_id
    ON {{schema}}.operations (namespace, operation_id) WHERE operation_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS operations_caller_key
    ON {{schema}}.operations (namespace, key) WHERE caller_key;

-- Any key, minted or the caller's: what a lease is taken by.
CREATE INDEX IF NOT EXISTS operations_key
    ON {{schema}}.operations (namespace, key);

-- The pending rows, in order: what Pending and adoption scan.
CREATE INDEX IF NOT EXISTS operations_pending
    ON {{schema}}.operations (namespace, seq) WHERE state = 1;

-- The finished rows, by age: what Prune deletes in batches.
CREATE INDEX IF NOT EXISTS operations_finished
    ON {{schema}}.operations (namespace, updated) WHERE state <> 1;

-- One row per namespace: its identity key (credential tags) and the newest
-- time written to it.
CREATE TABLE IF NOT EXISTS {{schema}}.namespaces (
    namespace      text        PRIMARY KEY,
    identity_key   bytea       NOT NULL,
    latest_written timestamptz
);
