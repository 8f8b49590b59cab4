-- idem's PostgreSQL journal, version 2: sealed rows (Options.Encryption).
-- Applied by Migrate over version 1 (schema.sql), in the same transaction
-- and under the same advisory lock. A pgjournal of version 1 refuses the
-- schema from then on, rather than write plaintext rows beside sealed ones.

-- A row whose record names a key ID (record->>'kid') keeps its request
-- part here, sealed (package seal: headers, the URL's query, the body's
-- SHA-256, identity and representation headers), and its body sealed in
-- the body column; its record column holds only what stays readable.
-- NULL for a plaintext row.
ALTER TABLE {{schema}}.operations ADD COLUMN IF NOT EXISTS sealed bytea;

-- Set, for good, once a Journal with Options.Encryption has opened the
-- namespace: a Journal without it writes no new row there.
ALTER TABLE {{schema}}.namespaces ADD COLUMN IF NOT EXISTS sealed boolean NOT NULL DEFAULT false;
