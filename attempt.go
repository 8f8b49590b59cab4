// This file holds the attempt loop shared by RoundTrip and Resume: build each
// attempt's request (key, AttemptHeader, a fresh body reader), send it,
// classify it, wait, and settle the operation or leave it pending. A 421 is
// retried on a new connection (RFC 9110 section 15.5.20).

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"time"
)

// ErrAttemptTimeout is wrapped in the error of an attempt that got no response
// headers within Options.AttemptTimeout (or WithAttemptTimeout's). The server
// may have acted.
var ErrAttemptTimeout = errors.New("idem: attempt timed out")

// maxDrain bounds how much of a discarded response body is read so its
// connection can be reused.
const maxDrain = 4 << 10

// op is one call being run: a journaled operation (rec != nil) or a request
// that is only retried.
type op struct {
	req    *http.Request // the caller's request (or one rebuilt by Resume); never modified
	method string        // req's method, "" made GET
	rec    *Record       // nil when unjournaled
	key    string        // idempotency key sent on every attempt; "" if none
	body   []byte
	stream io.ReadCloser // a body over the cap: sent once, never retried
	// maybeSent is set once an attempt may have reached the server, here or
	// earlier: from then on the operation can only be pending, never failed.
	maybeSent bool
	limits    limits // attempts and per-attempt timeout for this call
	resumed   bool   // run by Resume
	// redirects counts the 307s and 308s Resume followed in this pass; a
	// call's are counted from its request (redirectsBefore).
	redirects int
	// newConn sends the next attempt on a new connection, after a 421;
	// misdirected is set once an attempt of this call got a 421.
	newConn, misdirected bool
	// uncertain is set while an attempt may have reached the server since the
	// Reconciler last said the operation had not happened: the next attempt
	// asks it first. expired says the key may be gone from the server.
	uncertain, expired bool
	// noReplay keeps net/http from re-sending an attempt on its own: set
	// when a Reconciler is in use, for the server may not honour the key.
	noReplay  bool
	reconcile Reconciler // the call's, or Resume's; nil for none
	// retryToken is set when a retry-budget token was taken to re-send a
	// pending operation already attempted: its first attempt here is a retry.
	retryToken bool
	info       callInfo // what its responses carry (withInfo)
	// first is the first attempt's state; attempted is set once it is taken.
	first     attemptState
	attempted bool
}

// outcome is what the last attempt left.
type outcome struct {
	resp   *http.Response
	err    error
	status int
}

// run runs o's attempts and tells the response it returns, if any, which
// call it answers (ResponseInfo).
func (t *Transport) run(ctx context.Context, o *op) (*http.Response, error) {
	o.noReplay = o.rec != nil && o.reconcile != nil
	resp, err := t.loop(ctx, o)
	if resp != nil {
		withInfo(resp, o)
	}
	return resp, err
}

// loop sends attempts until one is final, the attempts or time run out, or
// the caller's context ends.
func (t *Transport) loop(ctx context.Context, o *op) (*http.Response, error) {
	sched := &schedule{cfg: t.cfg, clk: t.clock}
	maxAttempts := o.limits.maxAttempts
	if o.stream != nil {
		maxAttempts = 1
	}
	var last outcome
	retried := o.retryToken // this call took a retry token
	var host string         // the budget's name of o's host; "" while not needed
	switch {
	case retried:
		host = budgetHost(o.req.URL)
	case !t.budget.full():
		host = t.budget.first(o.req.URL, t.clock.Now())
	}
	for n := 1; ; n++ {
		if o.rec != nil && o.uncertain {
			if done, resp, err := t.reconcileFirst(ctx, o, last, func() time.Time { return t.clock.Now().Add(sched.backoff(n)) }); done {
				return resp, err
			}
		}
		var start time.Time
		if t.cfg.Observer != nil { // reading the clock costs every call
			start = time.Now()
		}
		resp, wrote, err := t.attempt(ctx, o, n, maxAttempts)
		if o.rec != nil {
			o.rec.Attempts++
			o.rec.LastAttempt = t.clock.Now()
		}
		if cerr := ctx.Err(); cerr != nil {
			discard(resp)
			return t.giveUp(ctx, o, outcome{err: cerr, status: last.status}, t.clock.Now())
		}
		last = outcome{resp: resp, err: err}
		if resp != nil {
			last.status = resp.StatusCode
		}
		reached := wrote && !unprocessed(err) || resp != nil
		o.maybeSent = o.maybeSent || reached
		o.uncertain = o.uncertain || reached
		class := t.cfg.Classifier(Attempt{Request: o.req, Response: resp, Err: err, Keyed: o.key != "", Wrote: wrote,
			N: n, Misdirected: o.misdirected})
		o.newConn = misdirected(resp)
		o.misdirected = o.misdirected || o.newConn
		if t.cfg.Observer != nil {
			t.cfg.observer.Attempt(ctx, AttemptEvent{Method: o.method, Journaled: o.rec != nil, Resumed: o.resumed,
				N: n, Status: last.status, Class: class, Duration: time.Since(start)})
		}
		switch {
		case resp != nil && (class == ClassFinal || class == ClassPermanent):
			// The server answered: whatever it said is the outcome.
			if host == "" && !t.budget.full() {
				host = budgetHost(o.req.URL)
			}
			if host != "" {
				t.budget.answered(host, retried)
			}
			return t.settle(ctx, o, resp)
		case (class == ClassFinal || class == ClassPermanent) && o.rec != nil && o.maybeSent:
			// An earlier attempt may have acted: not "failed", only unknown.
			return t.giveUp(ctx, o, last, t.clock.Now().Add(sched.backoff(n)))
		case class == ClassFinal || class == ClassPermanent:
			return nil, t.fail(ctx, o, err)
		case class == ClassRetryIfSafe && o.key == "" && !idempotent(o.method):
			if resp != nil {
				return resp, nil
			}
			return nil, fmt.Errorf("%w: %s %s: %w", ErrOutcomeUnknown, o.req.Method, o.req.URL.Redacted(), err)
		}
		// Every give-up below keeps the end of this wait as the earliest next
		// attempt, so Resume honours the server's Retry-After too.
		now := t.clock.Now()
		wait, fromServer := sched.wait(resp, now, n)
		if n >= maxAttempts || fromServer && wait > t.cfg.MaxRetryAfter || beyondDeadline(ctx, now, wait) ||
			o.limits.yield != nil && o.limits.yield() {
			return t.giveUp(ctx, o, last, now.Add(wait))
		}
		if host == "" {
			host = budgetHost(o.req.URL)
		}
		g := t.budget.take(host, now)
		if !g.ok {
			return t.denied(ctx, o, host, n, class, last, now.Add(wait))
		}
		retried = true
		discard(resp)
		last.resp = nil
		t.logRetry(ctx, o, n, maxAttempts, class, last, wait)
		t.cfg.observer.Retry(ctx, RetryEvent{Method: o.method, Journaled: o.rec != nil, Resumed: o.resumed,
			N: n, Status: last.status, Class: class, Wait: wait, RetryAfter: fromServer})
		if err := t.clock.Sleep(ctx, wait); err != nil {
			t.budget.undo(host, g) // the retry was never sent
			return t.giveUp(ctx, o, outcome{err: err, status: last.status}, now.Add(wait))
		}
		if o.limits.yield != nil && o.limits.yield() { // another host waited out the backoff
			t.budget.undo(host, g)
			return t.giveUp(ctx, o, last, t.clock.Now())
		}
	}
}

// attempt sends attempt n of maxN. wrote reports whether the request headers
// reached a connection; it is true when that is not traced (see traced).
func (t *Transport) attempt(ctx context.Context, o *op, n, maxN int) (resp *http.Response, wrote bool, err error) {
	st := &o.first // one allocation fewer for the usual call of one attempt
	if o.attempted {
		st = new(attemptState)
	}
	o.attempted = true
	var trace *httptrace.ClientTrace
	if t.traced(o) {
		st.trace.WroteHeaders = st.wroteHeaders
		if t.crashAt != nil {
			st.trace.WroteRequest = func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					t.crash(crashRequestWritten)
				}
			}
		}
		trace = &st.trace
	} else {
		st.written.Store(true)
	}
	actx := &st.ctx
	actx.start(ctx, &o.info, trace)
	d := o.limits.attemptTimeout
	if d > 0 {
		t.watch.add(actx, d)
	}
	attemptValue := ""
	if !t.cfg.DisableAttemptHeader {
		attemptValue = attemptHeader(n, maxN)
	}
	req := o.newRequest(actx, t.cfg.KeyHeader, attemptValue, st)
	base, done := t.base(), func() {}
	if o.newConn {
		base, done = t.newConnBase()
	}
	resp, err = base.RoundTrip(req)
	if d > 0 {
		t.watch.remove(actx) // the timeout runs until the response headers
	}
	switch {
	case err != nil && resp != nil:
		resp.Body.Close() // a broken base; net/http.Client does the same
		resp = nil
	case err == nil && resp == nil:
		err = errors.New("idem: base RoundTripper returned neither a response nor an error")
	case err == nil && resp.Body == nil:
		resp.Body = http.NoBody
	}
	if err != nil {
		actx.end(context.Canceled)
		done()
		if actx.timedOut.Load() && ctx.Err() == nil {
			err = fmt.Errorf("%w after %v: %w", ErrAttemptTimeout, d, err)
		}
		return nil, st.written.Load(), err
	}
	st.body.ReadCloser, st.body.ctx = resp.Body, actx
	resp.Body = &st.body
	if o.newConn {
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: done}
	}
	return resp, st.written.Load(), nil
}

// traced reports whether o's attempts must learn whether their request was
// written. Not for an unjournaled call that is keyed or idempotent under
// the DefaultClassifier: written or not, its failed attempts are retried
// alike (ClassRetry or ClassRetryIfSafe; see AttemptEvent.Class).
func (t *Transport) traced(o *op) bool {
	return o.rec != nil || o.key == "" && !idempotent(o.method) || !t.cfg.defaultClassifier || t.crashAt != nil
}

// discard drains a little of a response body and closes it, so the
// connection can be reused.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}

// attemptHeaders holds the AttemptHeader's values for the usual attempt
// limits, made once: attemptHeaders[maxN][n].
var attemptHeaders = func() (t [17][]string) {
	for maxN := 1; maxN < len(t); maxN++ {
		t[maxN] = make([]string, maxN+1)
		for n := 1; n <= maxN; n++ {
			t[maxN][n] = formatAttemptHeader(n, maxN)
		}
	}
	return t
}()

// attemptHeader is the AttemptHeader's value for attempt n of maxN.
func attemptHeader(n, maxN int) string {
	if 1 <= n && n <= maxN && maxN < len(attemptHeaders) {
		return attemptHeaders[maxN][n]
	}
	return formatAttemptHeader(n, maxN)
}

func formatAttemptHeader(n, maxN int) string {
	b := make([]byte, 0, 24)
	b = append(b, "attempt="...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "; max="...)
	b = strconv.AppendInt(b, int64(maxN), 10)
	return string(b)
}

// newRequest builds one attempt: the caller's request with a fresh reader over
// the same bytes (in st), the idempotency key, and the AttemptHeader's value
// unless it is "". As golang.org/x/oauth2 does, it copies the request and its
// header map, not the URL or the header values (capped, so an append copies);
// with no header to set (no key, no AttemptHeader), the copy shares the
// caller's map, which neither idem nor net/http writes to.
func (o *op) newRequest(ctx context.Context, keyHeader, attemptValue string, st *attemptState) *http.Request {
	r := o.req.WithContext(ctx)
	if o.key != "" || attemptValue != "" || o.req.Header == nil { // net/http refuses a nil map
		r.Header = make(http.Header, len(o.req.Header)+2)
		for k, v := range o.req.Header {
			if (o.key != "" && strings.EqualFold(k, keyHeader)) || (attemptValue != "" && strings.EqualFold(k, AttemptHeader)) {
				continue // replaced below
			}
			r.Header[k] = v[:len(v):len(v)]
		}
	}
	switch {
	case o.stream != nil:
		r.Body, r.GetBody = o.stream, nil
	case len(o.body) > 0:
		body := o.body
		r.ContentLength = int64(len(body))
		// net/http writes a body it knows to be in memory (a *bytes.Reader,
		// also in io.NopCloser) with its headers in one write, not two.
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if o.noReplay {
			// net/http re-sends a keyed request with a GetBody once, unseen, when a
			// kept-alive connection breaks: a second effect nothing reconciled.
			r.GetBody = nil
		}
		st.reader.Reset(body)
		r.Body = io.NopCloser(&st.reader)
	case o.noReplay:
		// http.NoBody would make the request replayable to net/http (see above); an
		// empty reader of its own is not, at the cost of a chunked empty body on HTTP/1.1.
		r.Body, r.GetBody, r.ContentLength = io.NopCloser(bytes.NewReader(nil)), nil, 0
	default:
		// nil, not http.NoBody: net/http wraps any non-nil body in an
		// io.LimitReader to write it, even an empty one.
		r.Body, r.GetBody, r.ContentLength = nil, nil, 0
	}
	if o.key != "" || attemptValue != "" {
		st.values = [2]string{o.key, attemptValue}
		values := st.values[:]
		if o.key != "" {
			r.Header[http.CanonicalHeaderKey(keyHeader)] = values[0:1:1]
		}
		if attemptValue != "" {
			r.Header[AttemptHeader] = values[1:2:2]
		}
	}
	return r
}

// misdirected reports whether resp is a 421 Misdirected Request.
func misdirected(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusMisdirectedRequest
}

// newConnBase returns the RoundTripper for an attempt that must not reuse a
// connection, and a function to call once the attempt is over. A base
// *http.Transport is cloned (same settings, empty pool), so the attempt dials
// anew for HTTP/1.1 and HTTP/2 alike; any other base only has its idle
// connections closed, so a busy HTTP/2 connection may carry the retry.
func (t *Transport) newConnBase() (http.RoundTripper, func()) {
	base := t.base()
	if ht, ok := base.(*http.Transport); ok {
		fresh := ht.Clone()
		return fresh, fresh.CloseIdleConnections
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return base, func() {}
}

// base is what attempts are sent through: Options.Base, else the
// Transport's own clone of http.DefaultTransport (defaultBase).
func (t *Transport) base() http.RoundTripper {
	if t.cfg.Base != nil {
		return t.cfg.Base
	}
	if t.own != nil {
		return t.own
	}
	return http.DefaultTransport
}
