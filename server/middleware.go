// middleware.go is the face of the package: New, Middleware.Wrap, and the steps a covered
// request goes through before its claim (key, identity, body, fingerprint). claim.go
// claims the key or answers from the record; run.go runs the handler under the claim.

package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/idem-go/idem/server/internal/lease"
)

// Middleware makes the handlers it wraps idempotent per Options. It is safe for concurrent
// use; one Middleware may wrap many handlers, which then share its Store and Options.
type Middleware struct {
	cfg       *config
	repeats   *lease.Repeater // Store calls with an unknown outcome, repeated in the background
	finishing finishing       // records whose handler returned here, being settled
	durations durations       // recent handler times, for 409's Retry-After
	// leaseConfig is the lease keepers' settings; each request's side is its holder.
	leaseConfig lease.Config
}

// New returns a Middleware for opts. It returns ErrNoStore if opts or opts.Store is nil,
// and an error wrapping ErrInvalidOptions for an option out of range.
func New(opts *Options) (*Middleware, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	c, err := resolve(o)
	if err != nil {
		return nil, err
	}
	return &Middleware{cfg: c, repeats: newRepeater(c), leaseConfig: leaseConfig(c)}, nil
}

// Wrap returns next made idempotent. Its type is that of every router's middleware,
// func(http.Handler) http.Handler.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

// request is what the middleware learned about a covered request with a key.
type request struct {
	start time.Time
	// ctx has the request's values but not its cancellation, for Store calls and the
	// handler: a client that goes away cuts neither short.
	ctx    context.Context
	scope  Scope
	body   []byte
	fp     string
	reader bodyReader
	// The handler's recorder and decision (run.go), here so that a request makes one
	// allocation for all three.
	rec recorder
	d   decision
}

// bodyReader reads the buffered body; Close does nothing.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// bodyReader returns the reader over the buffered body, rewound, for the handler (or the
// Recover hook: each call rewinds the one reader, so its last holder must be done).
func (rq *request) bodyReader() io.ReadCloser {
	rq.reader.Reset(rq.body)
	return &rq.reader
}

// serve is the middleware for one request.
func (m *Middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	c := m.cfg
	if !c.methods[r.Method] {
		next.ServeHTTP(w, r)
		return
	}
	if c.PolicyHeader != "-" {
		w.Header().Set(c.PolicyHeader, c.policy)
	}
	rq := &request{start: time.Now(), ctx: context.WithoutCancel(r.Context())}
	key, err := parseKey(r.Header.Values(c.KeyHeader))
	if err != nil {
		c.writeProblem(w, http.StatusBadRequest, ProblemKeyMalformed, "Malformed idempotency key",
			"The "+c.KeyHeader+" header must appear once and hold 1 to 255 visible ASCII characters, bare or as a quoted string.", 0)
		return
	}
	if key == "" {
		if c.Required {
			c.writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "Idempotency key missing",
				"This operation requires an "+c.KeyHeader+" header.", 0)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	identity := c.Identity
	if identity == nil {
		identity = authIdentity
	}
	id, err := identity(r)
	if err != nil {
		c.Logger.Warn("idempotency: Identity failed", "err", err)
		c.writeProblem(w, http.StatusForbidden, ProblemIdentity, "Unknown identity",
			"The request's identity could not be established, so its idempotency key cannot be scoped.", 0)
		return
	}
	rq.scope = scopeOf(r, key, id)
	if !m.readBody(w, r, rq) {
		return
	}
	fingerprint := c.Fingerprint
	if fingerprint == nil {
		fingerprint = DefaultFingerprint
	}
	if rq.fp, err = fingerprint(r, rq.body); err != nil {
		c.writeProblem(w, http.StatusBadRequest, ProblemBadRequestBody, "Invalid request body",
			"The body cannot be fingerprinted: "+err.Error(), 0)
		return
	}
	cl, ok := m.claim(w, r, rq)
	if !ok {
		return
	}
	m.run(next, w, r, rq, cl)
}

// readBody reads r's body in full into rq, up to MaxBodyBytes, and reports whether it
// could; if not, it has answered 413 or 400.
func (m *Middleware) readBody(w http.ResponseWriter, r *http.Request, rq *request) bool {
	c := m.cfg
	tooLarge := func() bool {
		c.writeProblem(w, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, "Request body too large",
			"The body of a request with an idempotency key must not exceed "+itoa(int(c.MaxBodyBytes))+" bytes.", 0)
		return false
	}
	if r.ContentLength > c.MaxBodyBytes {
		return tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	var body []byte
	var err error
	if r.ContentLength > 0 {
		// A declared length is what net/http's server lets the body hold: one buffer of
		// that size, filled once.
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, c.MaxBodyBytes))
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge()
	case err != nil:
		c.writeProblem(w, http.StatusBadRequest, ProblemBadRequestBody, "Request body unreadable",
			"The request body could not be read in full.", 0)
		return false
	}
	rq.body = body
	return true
}
