// Package idem makes non-idempotent HTTP calls (a payment, an order) safe to
// retry, across network faults and across process crashes.
//
// A request the caller wants done once, an operation, gets one idempotency
// key (a random UUID, or the caller's) for its whole life. Before its first
// byte is sent, the key and the exact request bytes are committed, with
// fsync, to a journal: a bbolt file by default (Open), or any journal.Store
// (NewTransport; journal/pgjournal for a fleet). Every attempt carries the
// same key and bytes, so a server that implements the IETF Idempotency-Key
// draft acts at most once and replays its stored response. If the process
// dies mid-call, the next run's Resume finds the operation pending and sends
// it again with the same key.
//
// # An operation's life
//
//  1. A call. A POST or PATCH (Options.Methods), or any request whose
//     context carries WithOperationID or WithKey, is checked, its body read
//     (at most Options.MaxBodyBytes) and its key taken or minted. Nothing
//     refused here is written or sent.
//  2. Write-ahead. Key, operation ID, method, URL and non-sensitive headers
//     and body are committed to the journal as a pending record. Only then
//     is anything sent; if the commit fails, the call fails.
//  3. Attempts. Each carries the key, the journaled bytes and the
//     AttemptHeader. The Classifier says what its outcome means; retryable
//     outcomes wait (jittered exponential backoff, or Retry-After) and try
//     again, up to Options.MaxAttempts, the context's deadline and the
//     host's RetryBudget.
//  4. Settled. A final response (2xx, 3xx, most 4xx) settles the operation:
//     the record keeps the status and drops the body.
//  5. Pending. When attempts or time run out with the outcome unknown, or
//     the caller's context ends, the operation stays pending and the call
//     returns a *PendingError naming the earliest next attempt.
//  6. Resume. Transport.Resume (at startup) or a background resumer
//     (StartResumer) sends pending operations again once due, with the same
//     key and bytes, and reports each Outcome.
//  7. Expired or failed. An operation pending longer than Options.KeyTTL is
//     never re-sent blindly: it expires and is reported with ErrKeyExpired,
//     for the caller to reconcile, unless Options.Reconcile does so first.
//     One that failed before the server could act is failed.
//  8. Pruned. Settled, failed and expired records are deleted after the
//     journal's Retention; pending ones never are.
//
// # Uncertain outcomes
//
// A timeout, a connection cut after the request was written, or a 5xx is
// never taken as proof that nothing happened: the operation stays pending
// and is sent again only with its key. Against an API that ignores keys, or
// forgets them sooner than a resume comes, set Options.Reconcile: a
// Reconciler looks the operation up by its business reference before
// anything that may have arrived is sent again (docs/reconcile.md).
//
// # Per-call options and responses
//
// WithKey, WithOperationID, WithIdentity, WithoutJournal, WithMaxAttempts,
// WithAttemptTimeout and WithReconcile travel in the request's context and
// apply to that call only; invalid ones fail the call before anything is
// written or sent. Two calls with one operation ID run one after the other,
// and the second sends with the first's key. ResponseInfo tells which
// operation and key a returned response answers; a *PendingError or
// *AlreadySettledError says the same of an error.
//
// # Secrets at rest
//
// Credentials never reach the journal: not the sensitive headers
// (Authorization, Proxy-Authorization, Cookie, Options.SensitiveHeaders),
// not URL userinfo, not Options.SensitiveQueryParams. Records keep their
// names only, and Resume sends nothing until Options.PrepareResume has put
// them back (ErrSensitiveHeaderMissing, ErrSensitiveQueryMissing). With
// Options.Journal.Encryption (pgjournal.Options.Encryption on PostgreSQL),
// what the journal keeps of each request is sealed with AES-256-GCM under a
// rotating boltjournal.Keyring; a record whose key is gone stays pending and
// is reported (journal.ErrUnknownEncryptionKey), never sent without its
// bytes (docs/secrets.md).
//
// # One journal, several identities
//
// An operation is bound to the identity it was created under: another
// identity that names it fails with ErrIdentityMismatch, nothing sent.
// Declare the identity (a tenant or account, never a credential) with
// Options.Identity or WithIdentity, so that a refreshed token continues the
// operation; with none declared, the creator's credentials are the identity,
// kept only as an HMAC tag under a key held by the journal.
//
// # Watching it run
//
// Options.Logger (a *slog.Logger; nil is silent) gets one record per retry,
// per operation left pending and per resume outcome, never a body or a
// header value. Options.Observer gets every attempt, retry, result and
// write-ahead; the module github.com/idem-go/idem/idemotel records them with
// OpenTelemetry. The journal/journalhttp package serves a read-only view.
//
// # Redirects, the journal file, clock steps
//
// A 307 or 308 moves a pending operation to its Location, durably, before
// the 3xx is returned; the hop an http.Client sends continues it with the
// same key, and its final answer settles it. A 301, 302 or 303 settles it.
// The bbolt file refuses a damaged meta page (*boltjournal.MetaPageError)
// rather than open one commit older, and the Transport's clock never reads
// earlier than a time in the journal. docs/real-world.md has the details:
// redirect chains and their limit, transport errors by type, Resume's
// fairness among hosts, the journal file, clock steps, and ending an
// operation by hand (boltjournal.Journal.Resolve and Discard).
//
// # The pieces
//
//   - Client: Open a journal, use HTTPClient wherever http.DefaultClient was,
//     StartResumer (or Resume at startup), Close at the end.
//   - Transport: the http.RoundTripper; NewTransport over any journal.Store.
//   - Options: every knob, its unit and default; zero means the default.
//   - Classifier and DefaultClassifier: what each attempt's outcome means.
//   - Package testserver: a fake payments API with server-side idempotency,
//     faults and a ledger, for proving exactly-once in tests; package server
//     is the middleware for your own service.
package idem
