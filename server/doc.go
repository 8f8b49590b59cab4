// Package server is the server half of idem: HTTP middleware that makes a handler safe to
// retry, as the IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header-07)
// and Stripe describe it. A client sends a unique key with a POST; the middleware runs the
// handler once per key and answers every retry with the stored response. It depends on
// the standard library only.
//
//	mw, err := server.New(&server.Options{Store: memstore.New(nil), Identity: accountOf})
//	if err != nil { ... }
//	http.ListenAndServe(addr, mw.Wrap(mux))
//
// The Store is what makes the claim atomic across instances: memstore for one process,
// the Redis and PostgreSQL stores for a fleet. Section numbers below are the draft's.
//
// # Which requests
//
// Requests whose method is in Options.Methods (POST and PATCH by default) are covered;
// others pass through untouched. The key is read from Options.KeyHeader (Idempotency-Key),
// as an RFC 8941 sf-string ("abc", section 2.1) or bare (abc, as Stripe's clients send
// it); both name one key. It must appear once and hold 1 to 255 visible ASCII characters
// (no space, no control character); otherwise 400. A covered request without a key gets
// 400 if Options.Required is set, and otherwise runs without any idempotency.
//
// # Scope
//
// A key names an operation only for one identity, method and path (section 5 recommends
// such a composite key): the same key from another identity is another operation, never
// sees this one's response, and neither waits for the other. The path is compared with
// its percent-encodings normalised (RFC 3986 section 6.2.2: /%70ayments is /payments).
// Options.Identity says who sent a request (tenant, account, API key ID); by default it
// is the Authorization header, and a request whose only credentials are cookies is
// refused with 403 until Identity names the user behind the session. Only a SHA-256 of
// the identity reaches the Store.
//
// # Fingerprint
//
// Each request with a key has a fingerprint (section 2.4); reusing the key with another
// fingerprint gets 422 and runs nothing. By default (DefaultFingerprint) it is a SHA-256
// over the method, the path and the body (not the query: it may carry a credential a
// client refreshes between attempts). A JSON body
// (application/json, or any +json type) is hashed in a canonical form in the manner of
// RFC 8785: object members sorted, white space dropped, strings with minimal escapes, and
// numbers written by value, so 100, 1e2 and 100.0 are one number. Numbers are compared as
// exact decimals, not as IEEE 754 doubles as RFC 8785 does, so amounts that differ past
// 2^53 stay different. A JSON body that is invalid, not UTF-8, or has a duplicate member
// name gets 400. Other bodies, and those sent with a Content-Encoding such as gzip, are
// hashed as bytes. Options.Fingerprint replaces all this.
//
// The body is read in full before the claim, up to Options.MaxBodyBytes (1 MiB; larger:
// 413), and handed to the handler from memory.
//
// # Claim, conflict, replay
//
// The first request with a key claims it in the Store atomically (section 2.6), under a
// lease, and runs the handler. A copy arriving while it runs gets 409 (section 2.7) with
// Retry-After estimating when the holder finishes: the moving average of the route's
// handler times on this instance (1 s before any), at most what is left of the holder's
// lease, in whole seconds (at least 1). With Options.Wait it polls the Store for up to that
// long first and replays the answer if it came. A copy that arrives while its key's handler
// has just returned on this instance waits (up to StoreTimeout) for the answer to be
// stored, instead of getting 409. Once the answer is stored, later copies get its status,
// header fields and body byte for byte, with "Idempotent-Replayed: true".
//
// # What is stored
//
// The handler's answer goes to its client as it is written; a copy is kept and stored
// when the handler returns. Header fields are stored except hop-by-hop ones and those in
// Options.UnstoredHeaders (Set-Cookie by default: one client's session is not another
// retry's).
//
// # Outcomes
//
// When the handler ends, its outcome decides its record's fate (seed article 2: a step
// whose outcome is unknown is treated as "may have happened", and looked up, never re-run
// blindly):
//
//	how the handler ended                          outcome     the record
//	2xx, 3xx, 4xx but 408/409/425/429; StoreResponse final       stored, replayed
//	408, 409, 425, 429; DiscardResponse (any status) no effect   released: a retry runs again
//	its transaction (MarkCompleted) did not commit   no effect   released
//	its transaction committed                        final       the answer stored in it
//	5xx it did not explain; a panic                  uncertain   Recover decides at once;
//	                                                             without Recover, stored
//	a lost lease                                     -           the new holder's
//
// Options.Classify maps a status to an outcome (DefaultClassify above; ClassifyTransactional
// releases 5xx answers, for handlers whose effects roll back with their error). An
// uncertain record is handed to Options.Recover at once: the holder gives up its lease
// (Store.Renew with 0), so the next copy asks the hook. Without a hook, the uncertain
// answer is stored, as Stripe stores a 500: retries get the 5xx replayed, or, for a panic,
// 422 "not-replayable" with original_status 500, telling the client to look the outcome
// up. A panic is uncertain even before the handler wrote anything, for the effect may come
// first (a card charged, then a nil pointer); a handler that knows nothing happened says so
// with DiscardResponse before it fails.
//
// # Answers that cannot be replayed
//
// An answer whose body exceeds Options.MaxResponseBytes (1 MiB), one the handler flushed
// (streamed), and one whose connection the handler hijacked reach their client as the
// handler wrote them, but are not kept: the record is completed as not replayable, and
// later copies get 422 with the problem type "not-replayable" (and the original status),
// telling the client the request ran and its result must be looked up. Such a record is
// never released, whatever its status: its effect may have happened, and a released key
// would run it again. Never is a truncated or empty body replayed.
//
// # Leases, fencing, recovery
//
// A claim holds its key under a lease (Options.Lease, 30 s) that the middleware renews
// every third of a lease while the handler runs. Every write the holder makes (renew,
// complete, release) is fenced by its token: if its lease was taken over meanwhile, the
// Store refuses, the answer is not stored over the new holder's, and the loss is logged and
// reported to Observer.LeaseLost. The handler's own client still gets its answer.
//
// A holder acts only while its lease is confirmed. It keeps a local deadline on the
// monotonic clock: the send time of the last renewal the Store confirmed (or of the claim),
// plus the lease, less a fifth of it. If no renewal is confirmed by then (the Store is cut
// off, or answers too slowly), the handler's context is cancelled with the cause
// ErrLeaseUnconfirmed; if the Store refuses a renewal, with ErrLeaseLost. The Store's lease
// cannot end before that deadline, for it was set by a call sent no earlier, so the
// cancellation comes at least a fifth of a lease before any other instance may take the
// record over. The handler's context is not cancelled when its client goes away (net/http
// would): the effect runs to its end, and the retry gets its stored answer; so a context
// that ends means a lease that ended, whose cause says which. What remains: a handler that
// ignores its context runs on, and its late writes to the Store are fenced out by its
// token; effects outside the Store (a charge
// sent after the cancellation) are the handler's to guard, with its context. A handler
// that completes in its own transaction (MarkCompleted) is not cancelled for an
// unconfirmed lease: its row lock keeps other holders out.
//
// A record whose lease lapsed without completion (the process crashed or stalled) is
// stuck: its effect may or may not have happened, so it is never run again blindly. With
// Options.Recover, the first copy to find it takes it over and asks the hook, which looks
// the effect up (e.g. by business reference) and returns the answer to store and replay,
// or says the handler may run again, or that it cannot tell yet (409; asked again a lease
// later). Without a hook, the key answers 409 until the record expires, with Retry-After
// set to the time until then.
//
// # When the Store does not answer
//
// Every Store call is bounded by Options.StoreTimeout (2 s, or a quarter of the lease if
// shorter), and a call that ends without an answer may have happened: the Store contract
// makes every call safe to repeat, recognised by its token, which the middleware mints.
// A claim is sent up to three times; if none is answered, the copy gets 503 and the claim
// (which may have landed) is released in the background once the Store answers again, so
// the key is not held by a handler that never ran: the next try runs it, within about a
// lease of the Store's return. A completion or release without an answer is repeated in
// the background, waiting up to a quarter of a lease between attempts, until it lands, is
// refused (another holder took over), or the record would have expired; the handler's
// client never waits for a Store call longer than StoreTimeout after its handler returned.
// Observer.StoreUncertain and StoreResolved report these calls; Middleware.Shutdown gives
// the repeats in flight a bounded time to land when a service stops. A record whose
// repeats were given up lapses and is recovered like a crashed holder's.
//
// # Expiry
//
// Records expire Options.TTL (24 h) after completion, or after their claim if stuck
// (section 2.3); then the key is new again. Expiry is the Store's, on its clock.
//
// # Advertising the policy
//
// Every covered answer carries Options.PolicyHeader (Idempotency-Policy), an RFC 8941
// dictionary such as `header="idempotency-key", ttl=86400, required=?0`; every problem
// answer links to Options.PolicyURL with rel="describedby" (section 2.7's Link form), and
// its type is PolicyURL#name, one of the Problem... constants.
//
// # Errors and the Store
//
// The middleware's own answers are RFC 9457 problem details (application/problem+json:
// type, title, status, detail), and never contain the key. If the Store cannot be reached,
// the middleware fails closed: 503 with Retry-After, the handler not run; the same key
// works normally once the Store is back (see "When the Store does not answer").
//
// # Observing
//
// Options.Observer counts claims, replays (and their latency), 409s, 422s, lost leases,
// recoveries, stored bytes, Store errors, and Store calls without an answer and how they
// ended; the idemotel module exports them to
// OpenTelemetry. Options.Logger (*slog.Logger; nil is quiet) gets the rest.
package server
