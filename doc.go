// Package idem makes non-idempotent HTTP calls (a payment, an order) safe to
// retry, across network faults and across process crashes.
//
// A request the caller wants done once — an operation — gets one idempotency
// key (a random UUID, or the caller's) for its whole life. Before its first
// byte is sent, the key and the exact request bytes are committed, with fsync,
// to a bbolt journal file. Every attempt carries the same key and bytes, so a
// server that implements the IETF Idempotency-Key draft acts at most once and
// replays its stored response. If the process dies mid-call, the next run's
// Resume finds the operation pending and sends it again with the same key.
//
// # An operation's life
//
//  1. A call. Client.HTTPClient (or a Transport) receives a POST or PATCH, or
//     any request whose context carries WithOperationID or WithKey. It checks
//     the request and the per-call options, reads the body (at most
//     Options.MaxBodyBytes) and takes the caller's key or mints one. Nothing
//     refused here is written or sent.
//  2. Write-ahead. The operation — key, operation ID, method, URL,
//     non-sensitive headers, body — is committed to the journal, fsync
//     included, as a pending record. Only then is anything sent. If the
//     commit fails, the call fails and nothing is sent.
//  3. Attempts. Each attempt carries the key, the journaled bytes and the
//     AttemptHeader ("Idem-Attempt: attempt=2; max=6"). DefaultClassifier
//     (or Options.Classifier) says what its outcome means; retryable outcomes
//     wait (jittered exponential backoff, or the server's Retry-After) and try
//     again, up to Options.MaxAttempts and the context's deadline, and as
//     long as the host's RetryBudget allows: when a server fails everything,
//     retries add at most 10% to the request rate.
//  4. Settled. A final response (2xx, 3xx, most 4xx) settles the operation:
//     the record keeps the status, the body is dropped, the caller gets the
//     response.
//  5. Pending. When attempts or time run out with the outcome unknown, or the
//     caller's context ends, the operation stays pending and the call returns
//     a *PendingError with the earliest time it may be sent again.
//  6. Resume. Transport.Resume (on startup) or a background resumer
//     (Client.StartResumer, in a long-running process) sends pending
//     operations again once they are due, with the same key and bytes, and
//     reports each Outcome. The server replays what it already did.
//  7. Expired or failed. An operation pending for longer than Options.KeyTTL
//     is never re-sent blindly: Resume marks it expired and reports
//     ErrKeyExpired, for the caller to reconcile, unless Options.Reconcile
//     does so first (see Reconciliation below). One that failed before the
//     server could act (a certificate error) is failed.
//  8. Pruned. Settled, failed and expired records are deleted after
//     Options.Journal.Retention; pending ones never are.
//
// # Reconciliation
//
// Against an API that ignores idempotency keys, or forgets them sooner than a
// resume comes, set Options.Reconcile: a Reconciler that looks an operation up by
// its business reference before idem sends again anything that may have arrived,
// and instead of expiring it (docs/reconcile.md).
//
// # Per-call options
//
// WithKey, WithOperationID, WithoutJournal, WithMaxAttempts and
// WithAttemptTimeout travel in the request's context and apply to that call
// only; see WithAttemptTimeout for how they combine with the context's own
// deadline, and context.go for the whole set. Invalid ones fail the call
// before anything is written or sent.
//
// # Which call a response answers
//
// Every response idem returns, from a call (through an http.Client,
// redirects included) or as a Resume Outcome's Response, names the call
// behind it: ResponseInfo(resp) gives its idempotency key (minted or the
// caller's; "" if none was sent), its operation ID and whether it is
// journaled, as stripe-go's LastResponse.IdempotencyKey does. A call that
// ends in an error says the same in its *PendingError or
// *AlreadySettledError.
//
// # Watching it run
//
// Options.Logger (a *slog.Logger; nil is silent) gets one record per retry,
// per operation left pending and per resume outcome, with the key and
// operation ID but never a body or header value. Options.Observer gets every
// attempt, retry, result and write-ahead for metrics; the module
// github.com/idem-go/idem/idemotel records them with OpenTelemetry, so the
// library itself depends on no metrics package. The AttemptHeader lets the
// server's own logs tell retries apart.
//
// # Secrets at rest
//
// Credentials never reach the journal file: not the sensitive headers
// (Authorization, Proxy-Authorization, Cookie, Options.SensitiveHeaders),
// not URL userinfo, not the query parameters named in
// Options.SensitiveQueryParams. Records keep only their names, and Resume
// sends nothing until Options.PrepareResume has put them back
// (ErrSensitiveHeaderMissing, ErrSensitiveQueryMissing). With
// Options.Journal.Encryption, what the journal does keep of each request (body,
// headers, URL query, body hash) is sealed with AES-256-GCM
// under a boltjournal.Keyring key the record names, so that, say, card data in a
// payment body cannot be read from the file; the key, operation ID, method,
// scheme, host, path, state and times stay readable, for Resume and
// `idem journal ls`. Keys rotate: records keep the key they were sealed
// under, and one whose key is gone stays pending and is reported
// (journal.ErrUnknownEncryptionKey), never dropped or sent without its bytes. The
// PostgreSQL journal seals its rows the same way, with the same boltjournal.Keyring, when
// given one (pgjournal.Options.Encryption: it does not read
// Options.Journal).
//
// # The pieces
//
//   - Client: Open a journal, use HTTPClient wherever http.DefaultClient was
//     used, call Resume on startup or StartResumer for the process's lifetime,
//     Close at the end.
//   - Transport: the http.RoundTripper. Decides what is journaled, validates
//     keys, writes ahead, runs the attempts, settles, and Resumes.
//   - Journal: the bbolt file, its Records and their States.
//   - Classifier and DefaultClassifier: what each attempt's outcome means;
//     Options holds the backoff and Retry-After limits.
//
// # Choices made where the design is silent
//
//   - KeyTTL is counted from the operation's creation, the earliest moment a
//     server can have stored the key.
//   - The request body is always read into memory (up to MaxBodyBytes) and
//     replayed from those bytes; unjournaled requests with a larger body are
//     sent once, without retries.
//   - URL userinfo is not journaled; PrepareResume must restore it.
//   - An operation's fingerprint takes the URL without its
//     SensitiveQueryParams: repeating an operation ID with a fresh token is
//     the same request, not ErrKeyReuse (under a declared identity, the same
//     operation; see below).
//   - Two calls with one operation ID run one after the other: the second
//     finds the first's record and sends with its key, so the server replays.
//   - A POST sent WithoutJournal still gets an idempotency key, kept in memory
//     for that call's retries, as stripe-go does.
//   - The AttemptHeader is on by default, as the AWS SDKs send
//     amz-sdk-request: it names no secret, is never journaled, and lets a
//     server see retries in its access log. Options.DisableAttemptHeader
//     turns it off for a server that refuses unknown headers.
//   - Re-sending a pending operation already attempted, by Resume or by a
//     call with its operation ID or key, spends a retry token, like any
//     retry: an outage must not come back that way.
//   - Close waits for a background resumer's sends up to Options.CloseTimeout,
//     not for calls in flight: those keep their operations pending, to be
//     resumed by the next Open.
//
// The package testserver is a fake payments server with server-side
// idempotency and fault injection, for proving exactly-once in tests.
//
// # Redirects
//
// An http.Client over idem that follows a redirect of a journaled call (RFC
// 9110 section 15.4) keeps the chain one operation: idem marks the 3xx it
// returns and knows the hop net/http builds from it (Request.Response),
// whatever the hop's context or headers carry. A chain never returns
// ErrKeyReuse.
//
//	301 302 303  Settled with that status. net/http sends the hop as a GET
//	             without body: a request of its own, without the operation's
//	             ID or key, not journaled. A 303 says the effect exists; a
//	             301 or 302 to a POST says it may not.
//	307 308      Not settled: before the 3xx is returned, the record moves,
//	             durably, to the Location (Record.Location; URL stays the
//	             operation's identity) and stays pending. The hop, same
//	             method and bytes, continues it with the same key; the
//	             chain's final answer settles it.
//
// A chain ends at net/http's default redirect limit: a 307 or 308 that is
// the 10th redirect of its chain settles the operation with that status,
// where it was sent, as a 301 would, and is not moved. A Client with the
// default policy stops there too and returns that 3xx together with its
// own error ("stopped after 10 redirects"), so the caller gets the last
// answer and nothing is left pending: a loop left pending would be walked
// again by every Resume. A CheckRedirect that allows more finds the
// operation settled at its 11th hop: ErrAlreadySettled, nothing sent.
//
// If the Client stops following a 307 or 308 earlier (a CheckRedirect that
// stops sooner or returns ErrUseLastResponse, a body without GetBody, a
// Transport used alone), the caller gets the 3xx or the Client's error and
// the operation stays pending: Resume sends it to the Location and follows
// its redirects as a Client would, and the 10th of them in one pass settles
// it, so Resume never walks a loop twice; to drop it instead, discard it by
// hand. A hop a CheckRedirect changed (method, URL,
// body, key) is not sent: a *PendingError matching ErrRedirectChanged. A hop
// after the operation settled is sent again with its key (the server
// replays), or refused after KeyTTL, as any call; one pointing elsewhere than
// where it settled is refused (ErrAlreadySettled), nothing sent. net/http
// sends no Authorization or Cookie to another domain and idem adds none back:
// a record moved there no longer lists them in Dropped, and PrepareResume
// sees the Location in req.URL, so check its host before adding credentials.
// The mark rides on the *http.Response idem returns: a RoundTripper between
// the Client and idem may wrap its Body, but must return that response.
//
// A moved operation lives at its Location, where the server holds its key:
// a later call that names it again (its operation ID or caller's key, with
// the URL it was created with) is sent there too, as Resume and the hop
// are, with the same key and bytes and the caller's headers, pending or
// settled within KeyTTL. On another domain those headers lose Authorization,
// Cookie and the others net/http drops on such a hop. The caller's
// SensitiveQueryParams go only to a Location on its domain that names them
// (Record.DroppedQuery); one the call cannot fill so leaves the operation
// unsent (ErrSensitiveQueryMissing), for Resume and PrepareResume.
//
// # The journal file
//
// A settled operation keeps no body in the file: the commit that settles it
// deletes the body, whole or in chunks (a failed one, or one expired past
// KeyTTL, keeps its body, for reconciling, until Retention; Resolve and
// Discard delete it). bbolt never shrinks the file; later
// commits reuse the pages earlier ones freed, so under steady traffic it stays
// near its largest working set. Freed pages keep their old bytes until reused:
// where bodies at rest matter, use Options.Journal.Encryption, or stop the application
// and rewrite the file with its live data only (bbolt compact -o NEW OLD, then
// move NEW over OLD). A writer Open fsyncs the journal's directory, so that a
// new file's name is as durable as its contents.
//
// With one of bbolt's two meta pages damaged, bbolt would open the file one
// commit older, perhaps without the write-ahead of an operation the server has
// received. Open refuses such a file with a *boltjournal.MetaPageError (journal.ErrCorrupt)
// naming it and the page. A meta page torn by a power loss during a commit
// (which never returned, so lost nothing) looks the same as one damaged later,
// so both are refused; after reconciling with the server, boltjournal.AcceptOlderCommit
// ("idem journal accept-older") opens the file as of the older commit. A
// truncated file is journal.ErrCorrupt, matching io.ErrUnexpectedEOF, for
// writers and readers alike.
//
// With both meta pages damaged, Open reads the file's first 64 MiB for copies of
// idem's root bucket page: a file with one is journal.ErrCorrupt, never "not an
// idem journal", naming the path and those pages. Keep that file: it may hold
// pending operations; docs/real-world.md says how to restore or rebuild it.
//
// # Loose ends
//
// Every pending operation has an end. One that Resume cannot send, such as
// a record sealed under a key the boltjournal.Keyring no longer has, expires once older
// than KeyTTL, like any other, and is reported once, with ErrKeyExpired
// joined to the reason. An operator who reconciled an operation with the
// server ends it by hand: boltjournal.Journal.Resolve (or `idem journal resolve`) marks
// it settled with the status found; boltjournal.Journal.Discard (`idem journal
// discard`) gives it up as expired, never to be sent. Both refuse an
// operation in flight in this process or already final, drop its body, and
// commit with fsync. The zero Transport is usable (default Options, no
// journal). Resume blocks until each due operation is done or its attempts
// run out: bound its context at startup, or use StartResumer.
//
// # Clock steps
//
// Journal times come from the wall clock, which an NTP step or a VM restore
// can move. The journal file keeps the newest time written in it, and a
// Transport's clock starts from that time: it never reads earlier than it,
// or than a time read since, and after a step back runs on from there, from
// the first call on, before anything reads the journal. A stored next
// attempt so holds an operation back at most the wait chosen for it (the
// backoff, or the server's Retry-After) from now; a step back shortens
// KeyTTL's count only by the time the process was down meanwhile. A step
// forward makes records look older: an operation may expire early
// (ErrKeyExpired: reconcile, nothing sent), a finished record may be pruned
// early; undone later, it stays in idem's clock, which runs on from the
// times written meanwhile. Retention's margin over KeyTTL (6 days by
// default) is the forward step a journal absorbs before a reused operation
// ID could mint a second key.
//
// # Resume fairness
//
// Resume and the background resumer share Options.ResumeConcurrency slots
// among hosts: each free slot goes to the host with the fewest operations
// being sent, and while another host waits, an operation of a host over its
// share gives its slot up after its current attempt or backoff wait (it
// stays pending). A host that accepts connections and never answers delays
// the others by at most one Options.AttemptTimeout (30 s by default) or one
// backoff wait (at most Options.MaxInterval, 30 s by default). Queues hold
// records' metadata only: at most a page (256) per host and two pages in all;
// when they are full, a host with none queued takes the place of the last
// record of the longest queue, which is read again later.
//
// # One journal, several identities
//
// An operation is bound to the identity it was created under: a call under
// another identity that names it (its operation ID or caller's key) fails
// with ErrIdentityMismatch before anything is sent, also after a restart.
// Declare the identity, a tenant or account name and never a credential,
// with Options.Identity (request to identity) or WithIdentity (per call);
// where both give one they must agree. A refreshed token under one declared
// identity continues the operation, with its key; the server must scope keys
// by the account too, not by the token (testserver: Options.Identity), or the
// refreshed token is a new client there. With none declared, the creator's
// credentials are the identity (sensitive headers, URL userinfo,
// SensitiveQueryParams), so a fresh token is refused: a service that rotates
// tokens declares its identity. The journal keeps the declared identity and,
// of credentials, only an HMAC-SHA-256 tag under a random key kept in the
// file: no credential is on disk, but a weak secret in a plaintext journal
// can be guessed offline by whoever holds the file; Options.Journal.Encryption seals
// both. Resume hands PrepareResume the identity (IdentityFrom) and trusts
// the credentials it adds, unless Options.Identity maps them to another.
// Content-Type and Content-Encoding are part of an operation's fingerprint
// (ErrKeyReuse). Records written before identities were bound (journal
// version 7 or older) are bound to none.
//
// # Classification of transport errors
//
// DefaultClassifier reads errors by type only. A TLS alert refusing the
// handshake or the client certificate (crypto/tls's alert type) and a
// proxy's refusal of CONNECT (*ProxyConnectError, typed by CheckProxyConnect
// through http.Transport.OnProxyConnectResponse) fail the operation at once:
// no HTTP handler saw the request, even when, in TLS 1.3, it was written. A
// nil Options.Base is a clone of http.DefaultTransport with CheckProxyConnect;
// a caller's Base is never modified, and one that is an *http.Transport with
// a Proxy is used through a clone with CheckProxyConnect installed after the
// caller's own hook, so wrong proxy credentials fail at once there too (the
// clone has its own connection pool; see Options.Base). A RoundTripper that
// wraps an *http.Transport is used as it is. A 421 Misdirected Request is
// re-sent once on a new connection, then final (RFC 9110 section 15.5.20).
// HTTP/2 REFUSED_STREAM is "nothing processed" (RFC 9113 section 8.7);
// net/http's GOAWAY error has no exported type, so it counts as "the server
// may have acted". Known limit: over HTTP/2, a TLS alert read before the
// first stream opens reaches idem as net/http's untyped "client conn could
// not be established" and is retried as "nothing sent".
package idem
