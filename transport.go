// This file holds Transport, the http.RoundTripper at idem's core: it decides
// whether a request is journaled, writes it ahead to the Journal (journal.go),
// then hands it to the attempt loop (attempt.go). client.go builds one for you.

package idem

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Transport is an http.RoundTripper that makes non-idempotent requests safe to
// retry, across network faults and process restarts. It is safe for
// concurrent use.
//
// For a request whose method is in Options.Methods (POST and PATCH by
// default), or whose context carries WithOperationID or WithKey, RoundTrip:
//
//  1. reads the body (at most Options.MaxBodyBytes) and closes it;
//  2. takes the caller's idempotency key, or mints a random UUID;
//  3. commits key, method, URL, non-sensitive headers and body to the
//     journal, with fsync, before the first byte is sent;
//  4. sends attempts with that key and the journaled bytes until a final
//     response, retrying as the Classifier and backoff say;
//  5. settles the operation and returns the response, or leaves it pending
//     and returns a *PendingError, which Resume picks up later.
//
// Other requests are retried the same way but not journaled; when their
// attempts run out they return the last response with a nil error, as the
// http.RoundTripper contract asks.
//
// RoundTrip never modifies the caller's request, closes its body exactly once
// on every path, and never returns a response together with an error.
type Transport struct {
	cfg     *config
	journal *Journal
	clock   clock
	locks   keyedLocks
}

// NewTransport returns a Transport that journals to j. A nil j gives a
// Transport that retries but refuses (ErrNoJournal) every request that would
// need journaling. The Transport does not own j; close j after the last call.
func NewTransport(j *Journal, opts *Options) (*Transport, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	return &Transport{cfg: cfg, journal: j, clock: realClock{}}, nil
}

func (t *Transport) base() http.RoundTripper {
	if t.cfg.Base != nil {
		return t.cfg.Base
	}
	return http.DefaultTransport
}

// RoundTrip implements http.RoundTripper. See the Transport doc for what it
// does and ErrX for the errors it returns before sending anything.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	if err := validURL(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	body, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	if !t.journaled(req) {
		o, err := t.unjournaled(req, body)
		if err != nil {
			body.close()
			return nil, err
		}
		return t.run(req.Context(), o)
	}
	if body.tooLarge {
		body.close()
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, t.cfg.MaxBodyBytes)
	}
	return t.roundTripJournaled(req, body.buf)
}

func (t *Transport) journaled(req *http.Request) bool {
	_, hasKey := keyFrom(req.Context())
	_, hasOp := operationIDFrom(req.Context())
	return t.cfg.methods[req.Method] || hasKey || hasOp
}

func validURL(req *http.Request) error {
	switch {
	case req.URL == nil:
		return fmt.Errorf("%w: nil URL", ErrInvalidRequest)
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("%w: unsupported scheme %q", ErrInvalidRequest, req.URL.Scheme)
	case req.URL.Host == "":
		return fmt.Errorf("%w: no host in URL", ErrInvalidRequest)
	}
	return nil
}

// body is a request body read into memory for replay. When the body is over
// the cap, buf holds the first bytes and rest the unread remainder.
type body struct {
	buf      []byte
	tooLarge bool
	rest     io.ReadCloser
}

func (b *body) close() {
	if b.rest != nil {
		b.rest.Close()
	}
}

// readBody reads at most MaxBodyBytes of the caller's body. It closes the body
// unless the body is over the cap, in which case rest keeps it open for a
// one-shot unjournaled send. A body shorter than the request's ContentLength
// is read again from GetBody.
func (t *Transport) readBody(req *http.Request) (body, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return body{}, nil
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, t.cfg.MaxBodyBytes+1))
	if err != nil {
		req.Body.Close()
		return body{}, fmt.Errorf("idem: reading request body: %w", err)
	}
	if int64(len(buf)) > t.cfg.MaxBodyBytes {
		return body{buf: buf, tooLarge: true, rest: req.Body}, nil
	}
	if err := req.Body.Close(); err != nil {
		return body{}, fmt.Errorf("idem: closing request body: %w", err)
	}
	if int64(len(buf)) < req.ContentLength {
		// An earlier call with this request value spent its Body. Start again
		// from GetBody, as net/http does for its own retries; without it, refuse
		// rather than send a shortened body.
		if req.GetBody == nil {
			return body{}, fmt.Errorf("%w: ContentLength=%d with Body length %d", ErrInvalidRequest, req.ContentLength, len(buf))
		}
		rc, err := req.GetBody()
		if err != nil {
			return body{}, fmt.Errorf("idem: request GetBody: %w", err)
		}
		fresh := *req
		fresh.Body, fresh.GetBody = rc, nil
		return t.readBody(&fresh)
	}
	return body{buf: buf}, nil
}

// unjournaled builds the operation for a request that is retried but not
// written down. A body over the cap is streamed once, without retries. A
// caller's key still goes on the wire, so it is checked as for a journaled
// request: an empty or malformed key, or two keys, is ErrInvalidKey.
func (t *Transport) unjournaled(req *http.Request, b body) (*op, error) {
	key, _, err := callerKey(req, t.cfg.KeyHeader)
	if err != nil {
		return nil, err
	}
	o := &op{req: req, key: key, body: b.buf, hasBody: req.Body != nil && req.Body != http.NoBody}
	if b.tooLarge {
		o.stream = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b.buf), b.rest), b.rest}
	}
	return o, nil
}

// roundTripJournaled finds or writes the operation's record, then runs it.
func (t *Transport) roundTripJournaled(req *http.Request, buf []byte) (*http.Response, error) {
	if t.journal == nil {
		return nil, ErrNoJournal
	}
	ctx := req.Context()
	key, hasKey, err := callerKey(req, t.cfg.KeyHeader)
	if err != nil {
		return nil, err
	}
	opID, hasOp := operationIDFrom(ctx)
	if hasOp {
		if err := validateKey("operation ID", opID); err != nil {
			return nil, err
		}
	}
	if !hasKey && !hasOp {
		if key, err = newKey(); err != nil {
			return nil, err
		}
	}
	lockKey := "k\x00" + key
	if hasOp {
		lockKey = "o\x00" + opID
	}
	// Calls for one operation run one at a time; the second finds the first's
	// record, so both share one key and one server-side effect.
	if err := t.locks.lock(ctx, lockKey); err != nil {
		return nil, err
	}
	defer t.locks.unlock(lockKey)

	rec, err := t.journal.find(lockKey)
	if err != nil {
		return nil, err
	}
	u := storedURL(req)
	sum, fp := fingerprint(req.Method, u, buf)
	if rec == nil {
		if !hasKey {
			if key, err = newKey(); err != nil {
				return nil, err
			}
		}
		now := t.clock.Now()
		rec = &Record{Key: key, OperationID: opID, Method: req.Method, URL: u,
			Header: t.storedHeader(req.Header), Body: buf, BodySHA256: sum,
			Created: now, Updated: now, State: Pending}
		if err := t.journal.insert(rec); err != nil {
			return nil, fmt.Errorf("idem: write-ahead failed, request not sent: %w", err)
		}
	} else if err := t.reuse(rec, fp, key, hasKey); err != nil {
		return nil, err
	}
	return t.run(ctx, &op{req: req, rec: rec, key: rec.Key, body: buf, hasBody: len(buf) > 0})
}

// reuse checks that a call may run an operation already in the journal.
func (t *Transport) reuse(rec *Record, fp, key string, hasKey bool) error {
	if rec.fingerprint() != fp || (hasKey && key != rec.Key) {
		return fmt.Errorf("%w: operation %q (key %s) was %s", ErrKeyReuse, rec.OperationID, rec.Key, rec.fingerprint())
	}
	expired := t.clock.Now().Sub(rec.Created) > t.cfg.KeyTTL
	switch {
	case rec.State == Expired || (rec.State == Pending && expired):
		return fmt.Errorf("%w: operation %q (key %s) created %s", ErrKeyExpired, rec.OperationID, rec.Key, rec.Created.UTC())
	case rec.State == Settled && expired:
		return &AlreadySettledError{OperationID: rec.OperationID, Key: rec.Key, Status: rec.Status, Settled: rec.Updated}
	}
	// Pending, failed, or settled within KeyTTL: send again with the same key;
	// for a settled one the server replays its stored response.
	return nil
}

// storedURL is the request URL without userinfo, which may hold a password.
func storedURL(req *http.Request) string {
	u := *req.URL
	u.User = nil
	return u.String()
}

// storedHeader drops sensitive headers and the key header before writing.
func (t *Transport) storedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if t.cfg.sensitive[ck] || strings.EqualFold(k, t.cfg.KeyHeader) {
			continue
		}
		out[ck] = append([]string(nil), v...)
	}
	return out
}
