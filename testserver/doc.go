// Package testserver is a fake payments API for testing retrying HTTP clients, modelled on
// net/http/httptest: NewServer starts a real HTTP server on a loopback port, URL says where,
// Client returns a plain client for it and Close stops it and waits for in-flight handlers.
//
// The server behaves like a careful payments API with server-side idempotency, as the IETF
// Idempotency-Key HTTP header draft (draft-ietf-httpapi-idempotency-key-header) and Stripe
// describe it, and fails like a bad network on request. A Ledger counts how many times each
// business reference produced a payment, so a test can prove exactly-once.
//
// # Endpoints
//
//   - POST /payments with a JSON body {"amount": 1250, "currency": "eur", "reference":
//     "order-4827"} creates a payment and answers 201 with {"id": "pay_...", "amount": ...,
//     "currency": ..., "reference": ...} and a Location header. amount is a positive integer
//     in minor units; currency and reference are non-empty strings; members are matched by
//     exact name; other members are ignored but count for the fingerprint. A body that is
//     not one JSON value or misses a field gets 400; a body over Options.MaxBodyBytes gets
//     413. Neither is stored.
//   - GET /payments/{id} answers 200 with the payment, or 404.
//   - GET /payments?reference=order-4827 answers 200 with {"data": [...]}, the payments made
//     for that reference (none, one, or more for a duplicate), ordered by ID; without a
//     reference, 400. A client reconciles an operation whose outcome it lost with it.
//   - GET /_ledger answers the Ledger as JSON.
//
// The API's own errors are JSON objects {"error": code, "message": text}; the idempotency
// middleware's are problem details (below).
//
// # Server-side idempotency
//
// POST /payments runs behind package server's middleware (github.com/idem-go/idem/server),
// the one a real Go service would use, with a server/memstore Store by default
// (Options.Store for another); its package doc states every rule. In short, as the IETF
// Idempotency-Key draft and Stripe describe it:
//
//   - The key is read from Options.KeyHeader (Idempotency-Key by default), bare or as an
//     RFC 8941 sf-string ("abc" and abc name the same key), 1-255 visible ASCII characters
//     with no space. A malformed key, an empty one included, gets 400. Without the header
//     the request is refused with 400 when Options.RequireKey is set, and otherwise
//     processed without any idempotency.
//   - A key is scoped by client identity, method and path. The identity is
//     Options.Identity's answer (an account, as Stripe scopes keys) or, without it, the
//     Authorization header, so a refreshed token is then a new client. Only a hash of it
//     reaches the Store; it is never logged. The same key from another identity is another
//     operation and never sees this identity's stored result.
//   - The first request with a key claims it atomically, so two concurrent requests with
//     one key run the payment once. While it runs, the same key gets 409 with Retry-After
//     set to the middleware's estimate of the payment's time, at most what is left of the
//     holder's lease (Options.Lease, 1 s by default: so 1).
//   - The same key with another fingerprint gets 422. The fingerprint is a SHA-256 of the
//     body in canonical JSON when the Content-Type is JSON (member order, white space,
//     escapes and the spelling of numbers do not matter: 2, 2.0 and 2e0 are one number),
//     of its bytes otherwise.
//   - Once done, the same key gets the stored status, headers and body again, with the
//     header "Idempotent-Replayed: true". Stored results expire Options.KeyTTL after they
//     were stored; then the key is new again.
//   - Nothing is stored for a request refused before processing: a bad key or body, a
//     body over MaxBodyBytes, an injected status or connection fault, a hold cut short by
//     Close. The key stays free, so a retry proceeds.
//
// The middleware's own answers (400 for a key, 409, 413 and 400 for a keyed request's
// body, 422) are RFC 9457 problem details (application/problem+json) whose type ends in
// the problem's name, e.g. "#key-in-progress"; the fake API's own errors are JSON objects
// {"error": code, "message": text}. Every POST /payments answer carries the
// Idempotency-Policy header that advertises the policy.
//
// A key whose holder's lease lapsed before it answered (its handler stalled, or the clock
// set with SetNow jumped) is recovered through the middleware's Recover hook by looking
// the payment up: a payment made under the key is replayed, one whose handler may still
// run here gets 409 until it finishes, and one never made runs again. Servers that share
// a Store should share Options.Payments too, so that a key stuck on one is recovered on
// another from the payment the first made. A handler whose context the middleware ended
// (it could no longer confirm the key's lease, so another server may take the key over)
// makes no payment and answers 503; the client going away does not stop a payment.
//
// # Faults
//
// Every POST /payments request gets one Fault: the next one queued with Server.Script if
// any, else one drawn from Options.Plan, else none. Faults before processing (FaultStatus,
// FaultDropBefore, FaultResetBody) act before the middleware and store nothing.
// FaultLostResponse and FaultSlowResponse act on whatever answer the request gets,
// including a replay or a 409, after the middleware has stored it. FaultHold acts only on a
// request that is about to create a payment; on any other it is dropped. Ledger.Faults counts
// the faults that acted, by FaultKind name.
//
// # Ledger
//
// The Ledger counts effects per reference. A payment created under a second key for a
// reference already paid is counted as a second effect: that is the duplicate a broken
// client produces, and Ledger.Check reports it.
//
// # Time
//
// Key expiry, leases and Retry-After dates follow the clock set with Server.SetNow
// (time.Now by default), unless Options.Store keeps its own. Fault delays (hold, slow
// response) and the lease's heartbeat are real durations.
package testserver
