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
//     in minor units; currency and reference are non-empty strings; other fields are ignored
//     but count for the fingerprint. A body that is not one JSON value or misses a field
//     gets 400; a body over Options.MaxBodyBytes gets 413. Neither is stored.
//   - GET /payments/{id} answers 200 with the payment, or 404.
//   - GET /payments?reference=order-4827 answers 200 with {"data": [...]}, the payments made
//     for that reference (none, one, or more for a duplicate), ordered by ID; without a
//     reference, 400. A client reconciles an operation whose outcome it lost with it.
//   - GET /_ledger answers the Ledger as JSON.
//
// Errors are JSON objects {"error": code, "message": text}.
//
// # Server-side idempotency
//
// POST /payments reads the key from Options.KeyHeader (Idempotency-Key by default), either
// bare or as an RFC 8941 sf-string ("abc" and abc name the same key); an empty key counts as
// missing. Without a key the request is refused with 400 when Options.RequireKey is set and
// otherwise processed without any idempotency.
//
// A key is scoped by client identity, method and path. The client identity is a hash of the
// Authorization header, or "anonymous" without one; the header itself is never stored or
// logged. A refreshed token is then a new client. Real APIs scope keys by account instead
// (Stripe does; the IETF draft leaves the scope to the server): set Options.Identity to
// return the account, e.g. from a header, and a refreshed token keeps its keys. Only a hash
// of what it returns is kept. The same key from another identity is another operation and
// never sees this identity's stored result.
//
// The first request with a key registers it atomically, so two concurrent requests with one
// key run the payment once. While the first is in progress, the same key gets 409 with
// Retry-After (Options.InProgressRetryAfter). The same key with a different fingerprint
// (SHA-256 of the body's canonical JSON: object keys sorted, numbers kept verbatim, so key
// order and white space do not matter) gets 422. Once done, the same key gets the stored
// status, headers and body again, with the header "Idempotent-Replayed: true". Stored results
// expire Options.KeyTTL after they were stored; then the key is new again. Requests refused
// before processing (400, 413, injected status or connection faults) store nothing and leave
// the key free, so a retry proceeds.
//
// # Faults
//
// Every POST /payments request gets one Fault: the next one queued with Server.Script if
// any, else one drawn from Options.Plan, else none. Faults before processing (FaultStatus,
// FaultDropBefore, FaultResetBody) store nothing. FaultLostResponse and FaultSlowResponse act
// on whatever answer the request gets, including a replay or a 409. FaultHold acts only on a
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
// Key expiry and Retry-After dates follow the clock set with Server.SetNow (time.Now by
// default). Fault delays (hold, slow response) are real durations.
package testserver
