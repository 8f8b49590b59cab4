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
// The pieces, from high level to low:
//
//   - Client: Open a journal, use HTTPClient wherever http.DefaultClient was
//     used, call Resume on startup (and periodically in a long-running
//     process: Resume sends only operations whose next-attempt time has come).
//   - Transport: the http.RoundTripper. Decides what is journaled, validates
//     keys, writes ahead, runs the attempts, settles, and Resumes.
//   - Journal: the bbolt file, its Records and their States.
//   - Classifier and DefaultClassifier: what each attempt's outcome means;
//     Options holds the backoff and Retry-After limits.
//
// Choices made where the design is silent:
//
//   - KeyTTL is counted from the operation's creation, the earliest moment a
//     server can have stored the key.
//   - The request body is always read into memory (up to MaxBodyBytes) and
//     replayed from those bytes; unjournaled requests with a larger body are
//     sent once, without retries.
//   - URL userinfo is not journaled; PrepareResume must restore it.
//   - Two calls with one operation ID run one after the other: the second
//     finds the first's record and sends with its key, so the server replays.
//
// The package testserver is a fake payments server with server-side
// idempotency and fault injection, for proving exactly-once in tests.
package idem
