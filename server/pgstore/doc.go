// Package pgstore is the PostgreSQL server.Store for idem's idempotency middleware
// (package server): one table shared by every instance of a service, so that concurrent
// copies of a request sent to different instances run the handler once, and a handler can
// complete its idempotency record inside its own transaction. It is a module of its own,
// so the server package and its users who do not need PostgreSQL never download pgx.
//
//	store, err := pgstore.Open(ctx, pool, nil) // the service's own *pgxpool.Pool
//	if err != nil { ... }
//	defer store.Close()
//	mw, err := server.New(&server.Options{Store: store, Identity: accountOf})
//
// # Table
//
// Open runs Migrate, which creates (or upgrades) in Options.Schema ("idem" by default)
// the objects of schema.sql and schema_v4.sql, embedded in the package and versioned
// (SchemaVersion, kept in server_version), under a transaction-scoped advisory lock so that instances starting
// together take turns. A schema written by a newer pgstore is refused (ErrNewerSchema).
// Every name starts with server_, so the schema may be shared with journal/pgjournal:
//
//	server_records
//	  scope        text PRIMARY KEY   server.Scope.ID(): hex SHA-256 of identity, method, path, key
//	  fingerprint  text NOT NULL      the claiming request's
//	  token        text               the holder's fencing token (the caller's); once done, the completer's
//	  lease_until  timestamptz        the holder's lease; NULL once done (in progress: NOT NULL)
//	  expires_at   timestamptz NOT NULL  the row counts as absent from then on
//	  prune_from   timestamptz NOT NULL  the claim's expires_at, never changed (version 4)
//	  status       integer            the stored response: status,
//	  header       bytea              header fields (length-prefixed name/value pairs:
//	                                  bytes, since a value may not be UTF-8),
//	  body         bytea              body,
//	  unreplayable text               and server.Response.Unreplayable
//	server_records_prune_from         index on prune_from, for pruning
//	fillfactor 70                     room on each page for a row's completed version
//	server_released                   (scope, token, expires_at): tokens Release let go,
//	                                  kept server.ReleasedTokenTTL so that a late claim with
//	                                  one is refused (version 3); pruned with the records
//
// # Statements
//
// Every time is the database's clock_timestamp() when the statement runs (not now(), the
// start of its transaction, which inside a service's long transaction would judge a lease
// by a stale clock), never the client's clock, so instances whose clocks disagree agree
// on every lease; durations travel as microseconds. $1 is always the scope, $2 the token,
// which the caller mints (server.NewToken). Each statement is sent in one round trip with
// SET LOCAL-scoped lock_timeout and statement_timeout (Options.StatementTimeout, 2 s), so a
// row held by a CompleteTx transaction makes concurrent copies fail in bounded time rather
// than hold the pool's connections. A pool whose connections start with both timeouts, no
// longer than StatementTimeout (RuntimeParams, e.g. ?lock_timeout=2s&statement_timeout=2s
// in its URL), is trusted with them: each statement then goes alone, and PostgreSQL runs
// one statement per call instead of two.
//
// Claim is one round trip for a new key, as the least such store makes it:
//
//	INSERT INTO server_records (scope, fingerprint, token, lease_until, expires_at, prune_from)
//	SELECT $1, $2, $5, now + lease, now + greatest(lease, ttl), now + greatest(lease, ttl)
//	WHERE NOT EXISTS (SELECT FROM server_released WHERE scope = $1 AND token = $5 AND …)
//	ON CONFLICT (scope) DO NOTHING
//
// If it made no row, the key is taken: a second round trip reads the live row it ran into
// (SELECT token, lease_until IS NOT NULL, fingerprint, lease_until - now, … WHERE scope =
// $1). A row in progress under the caller's own token is a repeat of a claim whose reply
// was lost, and counts as claimed; an expired row counts as absent: it is deleted
// (DELETE … WHERE scope = $1 AND expires_at <= now) and the claim made again; no row at
// all means the token was released before this claim arrived (refused), or the row went
// in between (claimed again). A claim that also returned the row it ran into, sparing a
// replay its second round trip, cost PostgreSQL about twice this INSERT's time on every
// new key.
//
// Each transition changes the row only while the token holds it in progress and it is
// live:
//
//	Renew     UPDATE … SET lease_until = now + lease, expires_at = greatest(expires_at, now + lease)
//	            WHERE scope = $1 AND token = $2 AND lease_until IS NOT NULL AND expires_at > now
//	Complete  UPDATE … SET lease_until = NULL, expires_at = now + ttl, status = …, header = …, body = …
//	            WHERE scope = $1 AND token = $2 AND lease_until IS NOT NULL AND expires_at > now
//	Release   DELETE … WHERE scope = $1 AND token = $2 AND lease_until IS NOT NULL AND expires_at > now
//	TakeOver  UPDATE … SET token = $4, lease_until = now + lease, …
//	            WHERE scope = $1 AND token = $2 AND lease_until <= now AND expires_at > now
//
// A transition that matches no row reads the live row once more (SELECT token = $2,
// lease_until IS NOT NULL) to tell a repeat from a refusal: a Complete whose row is done
// under its token, a Release that finds no row, a TakeOver whose row is held under its new
// token already were made before, and succeed; anything else is server.ErrLeaseLost.
// Concurrent take-overs of one stale token serialize on the row lock; the first changes
// the token and the others, re-checking the committed row, match nothing. Schema version
// 1 drew tokens from a sequence, which version 2 drops.
//
// Only scope and prune_from are indexed, and neither changes after the claim, so every
// Renew and Complete is a HOT update: the new version is written on the row's own page
// (fillfactor 70 leaves the room) with no index entry. Against version 3, whose index on
// expires_at each completion changed, a completion writes 213 bytes of WAL instead of 378
// and a claim 370 instead of 387 (EXPLAIN (ANALYZE, WAL), TestCompletionIsHOT), and 2,000
// of 2,000 completions are HOT instead of none.
//
// # Completing in the service's transaction
//
// CompleteTx runs the Complete statement in the service's own pgx.Tx, with the Hold from
// server.HoldFrom(r.Context()), and tells the middleware (server.MarkCompleted) that the
// handler completes the record itself, with its effects:
//
//	hold, _ := server.HoldFrom(r.Context())
//	tx, _ := pool.Begin(r.Context())
//	defer tx.Rollback(r.Context())
//	id := insertPayment(tx, req)             // the business row
//	resp := paymentResponse(id)              // the answer to store and to write
//	if err := store.CompleteTx(r.Context(), tx, hold, resp); err != nil { ... } // ErrLeaseLost: roll back
//	if err := tx.Commit(r.Context()); err != nil { ... }
//	write(w, resp)
//
// The business row and the stored response commit together, or neither does. When the
// handler returns, the middleware releases the record if it is still in progress under
// the request's token: the transaction rolled back (or failed, or the handler panicked
// before its commit), so nothing happened and a retry runs the handler again, whatever
// the status. After a commit that release is refused (the record is done), as expected;
// every retry replays resp. The row stays locked from CompleteTx until the transaction
// ends: no instance can take the record over in between, and a concurrent copy's Claim
// waits for the transaction to end, up to StatementTimeout (so call CompleteTx last, just
// before Commit, or copies wait instead of getting their 409 at once). The TTL of a record
// completed this way is Options.TTL, counted from the completion; keep it equal to
// server.Options.TTL. CompleteSQLTx is the same for a database/sql transaction (pgx's
// stdlib driver, lib/pq).
//
// # One commit: the claim, the effects and the answer
//
// CompleteTx still commits twice: the claim, then the handler's transaction. For a
// handler whose every effect is in this database, OneCommit makes it one commit: its Claim
// begins a transaction and inserts the claim row in it, Wrap runs the handler with that
// transaction in its context (TxFrom), holds its answer back, stores it in the same
// transaction, commits, and only then writes it:
//
//	oc := store.OneCommit()
//	mw, _ := server.New(&server.Options{Store: oc, Identity: accountOf})
//	http.Handle("POST /payments", mw.Wrap(oc.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		tx, _ := pgstore.TxFrom(r.Context())
//		id := insertPayment(r.Context(), tx, req) // no Commit, no Rollback: Wrap does them
//		write(w, paymentResponse(id))
//	}))))
//
// What it guarantees: the claim row, the handler's rows and the stored answer commit
// together or not at all. A concurrent copy's claim waits on the row's unique index until
// the transaction ends, then replays the stored answer (or gets 422 for another body), or
// runs the handler itself if the transaction rolled back; a wait longer than
// StatementTimeout (or three quarters of the middleware's StoreTimeout) answers 409 with
// Retry-After. A 5xx answer or a panic rolls back: nothing happened and the key is free. A
// process killed, or a connection cut, before the commit leaves no row at all (PostgreSQL
// rolls back), so there is no stuck key and nothing for Recover. A commit that fails or
// gets no answer is an unknown outcome: the client gets 503, and its retry with the same
// key finds the stored answer (a replay) if the commit landed, or runs the handler once if
// it did not; never a second effect.
//
// What it costs: one pooled connection per request in flight, held from the claim to the
// commit, so size the pool for the requests in flight; answers are buffered, so a handler
// cannot stream; and a copy waits (up to the lock timeout) instead of getting 409 at once.
//
// Per request with one payment row (BenchmarkPaymentCommits, a pgx tracer counting): one
// writing commit and 5 round trips (BEGIN, the claim, the handler's INSERT, the
// completion, COMMIT), against 2 and 7 for CompleteTx (the claim; BEGIN, INSERT,
// completion, COMMIT; the middleware's release, refused, and its check) and 3 and 3 for
// the middleware's own Complete. Time, on a shared and heavily loaded 2-vCPU machine (5
// interleaved rounds, median of the per-round ratios, which ranged widely): one-commit
// took 0.77x the time of CompleteTx per request with 1 client and 1.04x with 16, where
// PostgreSQL's group commit already shares WAL flushes between requests.
//
// # Pruning
//
// An expired row already counts as absent to every method; pruning only keeps the table
// small. Prune deletes expired rows Options.PruneBatch (1,000) at a time, oldest first,
// each batch one DELETE … WHERE scope IN (SELECT … WHERE prune_from <= now AND expires_at
// <= now ORDER BY prune_from LIMIT n FOR UPDATE SKIP LOCKED), until fewer remain; several
// instances may prune at once. prune_from is the claim's expiry, which the completion does
// not move (so that it stays HOT): a row completed after its claim is looked at from then
// and deleted once expires_at has passed too. Rows written before version 4 have
// prune_from '-infinity' and are judged by expires_at alone. A Store prunes in the
// background every Options.PruneEvery (10 minutes) until Close; a negative PruneEvery
// turns that off, for services that prune from a job.
//
// # Cost
//
// Against the local server (PostgreSQL 15, synchronous_commit on, 2 vCPUs, 2026-12-06): a
// new key's Claim and Complete take 0.64-0.85 ms together (two commits, each waiting for
// its WAL flush); a replay's Claim, 0.09-0.17 ms (BenchmarkClaimComplete,
// BenchmarkClaimReplay, three runs). The first depends most on the disk's flush.
//
// # Failures
//
// Any database error (the server down, a timeout, ctx ended) is returned wrapped, never
// as ErrLeaseLost: the call may have happened, and the middleware repeats it with its
// token (a claim it could not make answers 503, the handler not run).
package pgstore
