// Package server is the server half of idem: HTTP middleware that makes a handler safe to
// retry, as the IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header-07)
// and Stripe describe it. A client sends a unique key with a POST; the middleware runs the
// handler once per key and answers every retry with the stored response. It depends on
// the standard library only.
//
//	mw, err := server.New(server.Options{Store: memstore.New(nil), Identity: accountOf})
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
// Retry-After set to what is left of the holder's lease, in whole seconds (at least 1); or,
// if Options.Wait is set, polls the Store for up to that long and replays the answer if it
// came, else gets the 409. Once the handler has answered, later copies get the stored
// status, header fields and body byte for byte, with "Idempotent-Replayed: true".
//
// # What is stored
//
// The handler's answer goes to its client as it is written; a copy is kept and stored
// when the handler returns. Header fields are stored except hop-by-hop ones and those in
// Options.UnstoredHeaders (Set-Cookie by default: one client's session is not another
// retry's). Which answers are stored is Options.StoreStatus; by default (DefaultStoreStatus)
// 2xx, 3xx and 4xx except 408, 409, 425 and 429, which ask the client to come back. A 5xx
// is not stored: the key is released, and a retry runs the handler again. A handler
// overrides the policy for its own answer with StoreResponse (e.g. a 500 after an effect
// that cannot be undone) or DiscardResponse (e.g. a 503 raised before any effect).
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
// A record whose lease lapsed without completion (the process crashed or stalled) is
// stuck: its effect may or may not have happened, so it is never run again blindly. With
// Options.Recover, the first copy to find it takes it over and asks the hook, which looks
// the effect up (e.g. by business reference) and returns the answer to store and replay,
// or says the handler may run again, or that it cannot tell yet (409; asked again a lease
// later). Without a hook, the key answers 409 until the record expires, with Retry-After
// set to the time until then. A handler that panics leaves its record stuck the same way.
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
// the middleware fails closed: 503 with Retry-After, the handler not run, nothing changed;
// the same key works normally once the Store is back. If the Store fails after the handler
// ran, its answer reaches the client but cannot be stored, and the record is recovered
// like a crashed holder's.
//
// # Observing
//
// Options.Observer counts claims, replays (and their latency), 409s, 422s, lost leases,
// recoveries, stored bytes and Store errors; the idemotel module exports them to
// OpenTelemetry. Options.Logger (*slog.Logger; nil is quiet) gets the rest.
package server
