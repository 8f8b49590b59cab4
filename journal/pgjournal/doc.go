// Package pgjournal is an idem journal on PostgreSQL: a journal.Store that
// several instances of a service share, so that any of them finishes the
// pending operations of one that died, with the same idempotency key and
// the same bytes.
//
// Open takes the service's own *pgxpool.Pool (pgx v5) and creates or
// upgrades the tables it needs in Options.Schema (schema.sql, then
// schema_2.sql, applied by Migrate under an advisory lock). One set of tables holds any number of
// journals, each under its Options.Namespace: the operation ID and a
// caller's key are unique per namespace.
//
// # Leases and fencing
//
// An operation is leased to one instance while it sends it: Create leases
// the row it writes, and Claim (or TryClaim) leases an existing row, both
// on the database's clock (leased_until = now() + Options.Lease); a
// running Journal renews its leases every Lease/3. A name claimed while it
// had no row, whose row another instance then wrote, is leased by Get,
// which waits for it as Claim does. Claim of a key (a name without an
// operation ID: idem mints most of them, new, so without a row) makes no
// round trip: the Get or Reload that reads its row before it is sent takes
// the lease in the same way. The leases and Gets by operation ID of the
// moment share one statement each, as write-aheads share one INSERT. Any instance takes over
// a row whose lease ran out, whatever its identity, and bumps the row's
// epoch as it does. Every Update is conditional on the epoch its record was
// read with: an instance that stalled past its lease (a GC pause, a frozen
// VM) changes nothing, so the adopter's outcome stands. Update says so with
// ErrFenced; a deferred settle, which the caller does not wait for, is
// counted in Stats.FencedSettles.
// Client clocks never judge a lease.
//
// Worst case from an instance's death to adoption: Options.Lease (the last
// renewal's lease running out) plus the adopter's resume interval.
// Within one process at most one attempt of an operation is in flight, as
// with the bbolt journal; across instances, a holder that stalled past its
// lease may overlap with its adopter for one attempt, which the server's
// idempotency (the same key) makes harmless.
//
// # Durability
//
// Create returns once the row is committed and its WAL flushed (the
// Creates of the moment share one INSERT and one commit), as does any
// synchronous Update. A Deferred Update to a final state (a settle) is
// queued and returns at once: it rides the next write-ahead's transaction,
// or is written on its own 20 ms later, by Flush, or at Close, each row
// conditional on its own epoch and lease. Until then the row stays leased
// to this Journal, which reads the settle as written. A settle lost with
// the process costs one harmless resend with the same key: the server
// replays its stored response.
//
// # Outbox
//
// An Outbox journals a call inside the caller's own transaction
// (EnqueueTx, EnqueueSQLTx): it is sent, by any instance's Resume, if and
// only if that transaction commits; Run wakes a sender on each commit.
//
// A Transport over a Journal reads its time from it (Now, journal.Clock):
// the database's clock, so the created, due and expiry times of a fleet
// agree whatever the instances' clocks say.
//
// Records and SchemaVersion read a journal without opening it, for tools
// (the idem command's journal ls, show and stats take a postgres:// URL).
//
// # Encryption at rest
//
// Sensitive headers and query parameters are never written. With
// Options.Encryption, a seal.Keyring (boltjournal.Keyring: the bbolt journal's
// type and rules, package seal), what a row keeps of its request is sealed
// with AES-256-GCM under the Keyring's Current key: the body (in the body
// column), and the headers, the URL's query, the body's SHA-256, the
// identity binding and representation headers (in the sealed column).
// The key, operation ID, method, scheme, host and path, state, times,
// attempts, status, last error and the key ID ("kid" in the record column)
// stay readable, for leases, listings and Resume; sealed bytes are bound
// to them, so a body moved to another row does not open. A row keeps its
// key for life: rotate by adding a key and making it Current, and keep the
// old one while rows sealed under it may be read. A row whose key ID the
// Keyring lacks is listed Sealed and read as journal.ErrUnknownEncryptionKey;
// one altered, or read with another key under its ID, as
// journal.ErrDecrypt: it stays pending and is never sent without its
// bytes. A namespace once opened with Encryption is marked so for good,
// and takes no plaintext row from then on, from any instance
// (journal.ErrInvalidOptions). docs/fleet.md has the figures.
package pgjournal
