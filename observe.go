// This file holds what idem tells about its work: the Observer hook for
// metrics (the module idemotel turns it into OpenTelemetry), structured
// logging (silent unless Options.Logger is set; never a body, a header value
// or an unmasked error text), and ResponseInfo on every response returned.

package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Observer receives a report of every attempt, retry, write-ahead and
// operation result, for metrics. Set one in Options.Observer; nil means none.
// The module github.com/idem-go/idem/idemotel implements it with
// OpenTelemetry.
//
// Methods are called synchronously on the request path (the caller's
// goroutine, or a resumer's), so they must be fast and must not block; they
// are called concurrently, so an Observer must be safe for concurrent use.
// Events carry no URL, header, body or error text, so nothing secret reaches
// an Observer.
//
// Embed NopObserver in an implementation to keep compiling if methods are
// added to this interface later.
type Observer interface {
	// Attempt reports one attempt (one HTTP round trip), journaled or not,
	// once it has been classified. Attempts cut short by the caller's context
	// are not reported.
	Attempt(ctx context.Context, e AttemptEvent)

	// Retry reports a decision to wait and try again, before the wait.
	Retry(ctx context.Context, e RetryEvent)

	// RetryDenied reports a retry that the RetryBudget did not allow: e is
	// the retry that would have been made (N is 0 for a resume refused
	// before its first send; Wait is the time until the operation may be
	// tried again).
	RetryDenied(ctx context.Context, e RetryEvent)

	// Result reports where a call or a resume left a journaled operation:
	// settled, pending (the outcome still unknown), failed, or expired.
	// Together with ResultEvent.Resumed, these are Resume's outcomes.
	Result(ctx context.Context, e ResultEvent)

	// PendingChanged reports a change of the number of pending operations:
	// +1 for a write-ahead, -1 when one settles, fails or expires, +n when a
	// Transport is built over a journal holding n, -n when its Client is
	// closed. Summed, the deltas are a gauge, correct across several Clients.
	PendingChanged(delta int)

	// WriteAhead reports a write-ahead commit (fsync included) and how long
	// it took, in wall time. err is non-nil if it failed and nothing was
	// sent.
	WriteAhead(ctx context.Context, d time.Duration, err error)
}

// AttemptEvent describes one attempt.
type AttemptEvent struct {
	Method    string
	Journaled bool // the call is journaled
	Resumed   bool // the call was made by Resume
	N         int  // attempt number within this call, from 1
	Status    int  // response status, or 0 if the attempt got no response
	// Class is what the Classifier made of it. For an unjournaled request
	// with an idempotent method or a key, under the DefaultClassifier, idem
	// does not trace whether it was written, since either way a failed
	// attempt is retried: one that failed other than by a dial, DNS or
	// proxy error reads as possibly written (ClassRetryIfSafe).
	Class    Class
	Duration time.Duration // until the response headers or the error
}

// RetryEvent describes a retry about to happen.
type RetryEvent struct {
	Method     string
	Journaled  bool
	Resumed    bool
	N          int           // the attempt that is being retried, from 1
	Status     int           // its status, or 0
	Class      Class         // ClassRetry or ClassRetryIfSafe
	Wait       time.Duration // how long the call waits before the next attempt
	RetryAfter bool          // the server chose the wait (Retry-After)
}

// ResultEvent describes where a call or resume left a journaled operation.
type ResultEvent struct {
	State    State // StateSettled, StatePending, StateFailed or StateExpired
	Status   int   // the final status if StateSettled, else the last status seen or 0
	Attempts int   // attempts recorded for the operation, across calls and restarts
	Resumed  bool  // the call was made by Resume
	// NotSent is set, with State Pending, for a resume that sent nothing
	// because PrepareResume failed or did not restore a sensitive header.
	NotSent bool
}

// NopObserver is an Observer that does nothing. Embed it in an Observer that
// implements only some methods.
type NopObserver struct{}

func (NopObserver) Attempt(context.Context, AttemptEvent)            {}
func (NopObserver) Retry(context.Context, RetryEvent)                {}
func (NopObserver) RetryDenied(context.Context, RetryEvent)          {}
func (NopObserver) Result(context.Context, ResultEvent)              {}
func (NopObserver) PendingChanged(int)                               {}
func (NopObserver) WriteAhead(context.Context, time.Duration, error) {}

// result reports where a call left a journaled operation.
func (t *Transport) result(ctx context.Context, o *op) {
	t.cfg.observer.Result(ctx, ResultEvent{State: o.rec.State, Status: o.rec.Status,
		Attempts: o.rec.Attempts, Resumed: o.resumed})
}

func (t *Transport) log(ctx context.Context, level slog.Level, msg string, o *op, args ...any) {
	l := t.cfg.Logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []any{"method", o.method, "url", logURL(o.req.URL)}
	if o.key != "" {
		attrs = append(attrs, "key", o.key)
	}
	if o.rec != nil && o.rec.OperationID != "" {
		attrs = append(attrs, "op", o.rec.OperationID)
	}
	l.Log(ctx, level, msg, append(attrs, args...)...)
}

func (t *Transport) logRetry(ctx context.Context, o *op, attempt, maxAttempts int, class Class, last outcome, wait time.Duration) {
	t.log(ctx, slog.LevelInfo, "idem: retrying", o, "attempt", attempt, "max_attempts", maxAttempts,
		"class", class.String(), "status", last.status, "err", t.safeErr(o, last.err), "wait", wait)
}

// logResume logs the outcome of resuming one operation. req is the request
// rebuilt for it, or nil if Resume got no further than the journal; its URL
// and headers say what to mask in the error text.
func (t *Transport) logResume(ctx context.Context, rec *Record, req *http.Request, resp *http.Response, err error) {
	l := t.cfg.Logger
	if l == nil || errors.Is(err, errNotPending) || errors.Is(err, errNotDue) {
		return
	}
	level, result := slog.LevelInfo, "settled"
	var status int
	var pe *PendingError
	switch {
	case resp != nil:
		status = resp.StatusCode
	case errors.Is(err, ErrKeyExpired):
		level, result = slog.LevelError, "expired"
	case errors.As(err, &pe):
		level, result, status = slog.LevelWarn, "pending", pe.LastStatus
	default: // PrepareResume failed, credentials missing, journal error
		level, result = slog.LevelWarn, "not sent"
	}
	u, _ := url.Parse(rec.URL)
	attrs := []any{"method", rec.Method, "url", logURL(u), "key", rec.Key}
	if rec.OperationID != "" {
		attrs = append(attrs, "op", rec.OperationID)
	}
	attrs = append(attrs, "result", result, "status", status, "attempts", rec.Attempts)
	if result == "pending" {
		attrs = append(attrs, "next_attempt", rec.NextAttempt)
	}
	if err != nil {
		var h http.Header
		if req != nil {
			u, h = req.URL, req.Header
		}
		attrs = append(attrs, "err", t.maskErr(err, u, h))
	}
	l.Log(ctx, level, "idem: resume outcome", attrs...)
}

// logURL is the URL as logged: scheme, host and path. Userinfo may hold a
// password and the query an API key, so neither is logged.
func logURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	// An opaque URL ("http:user:pass@host") may hide userinfo in Opaque,
	// which is left out with the rest.
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return c.String()
}

// safeErr is an error's text for a log record, with the request's secrets
// masked; "" for no error.
func (t *Transport) safeErr(o *op, err error) string {
	if err == nil {
		return ""
	}
	return t.maskErr(err, o.req.URL, o.req.Header)
}

// maskErr replaces, in err's text, the user name, password, query and
// fragment of u and the values of sensitive headers in h: a base
// RoundTripper's error may quote them.
func (t *Transport) maskErr(err error, u *url.URL, h map[string][]string) string {
	s := err.Error()
	if u != nil {
		// The URL as net/http and most code quote it, whole, first: what
		// is left of it is what logs show.
		for _, whole := range []string{u.String(), u.Redacted()} {
			if len(whole) > 0 {
				s = strings.ReplaceAll(s, whole, logURL(u))
			}
		}
	}
	var secrets []string
	if u != nil && u.User != nil {
		secrets = append(secrets, u.User.Username())
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	if u != nil && u.RawQuery != "" {
		// The query may hold an API key; which parameter, idem cannot know.
		// Each value is masked as written (percent-encoded) and decoded.
		secrets = append(secrets, u.RawQuery)
		for _, pair := range strings.Split(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(pair, "="); ok {
				secrets = append(secrets, v)
			}
		}
		for _, vals := range u.Query() {
			secrets = append(secrets, vals...)
		}
	}
	if u != nil && u.Fragment != "" {
		// Never sent, yet quoted with the URL; OAuth puts tokens there.
		secrets = append(secrets, u.EscapedFragment(), u.Fragment)
	}
	for name, vals := range h {
		if !t.cfg.sensitive[http.CanonicalHeaderKey(name)] {
			continue
		}
		for _, v := range vals {
			secrets = append(secrets, v)
			// "Bearer tok": the credential alone may be quoted, too.
			if _, cred, ok := strings.Cut(v, " "); ok {
				secrets = append(secrets, strings.TrimSpace(cred))
			}
		}
	}
	for _, sec := range secrets {
		if len(sec) >= 3 { // masking "a" would garble the message, not protect it
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// Info describes the call a response answers.
type Info struct {
	// Key is the idempotency key sent with every attempt: the caller's
	// (WithKey or the key header) or the one idem minted. "" for a request
	// sent without one (an unjournaled GET, say).
	Key string
	// OperationID is the caller's operation ID (WithOperationID), or "".
	OperationID string
	// Journaled reports whether the operation is in the journal: false for
	// a request that is only retried (an idempotent method, or
	// WithoutJournal), whose key, if any, was kept in memory for this call.
	Journaled bool
}

type infoCtxKey struct{}

// callInfo is the Info a call's responses carry in their request's context;
// ready is set once the call returns a response, and until then
// ResponseInfo reports nothing (a Classifier or base sees attempts first).
type callInfo struct {
	info  Info
	ready atomic.Bool
}

// ResponseInfo returns the Info of the call that resp answers, and whether
// resp came from an idem Transport: from RoundTrip (directly, or through an
// http.Client, redirects included) or as an Outcome.Response of Resume. It
// is false for a nil resp or a response idem did not return. A
// RoundTripper between the caller and idem may wrap the response's Body but
// must keep its Request, where the Info travels (in its context).
func ResponseInfo(resp *http.Response) (Info, bool) {
	if resp == nil || resp.Request == nil {
		return Info{}, false
	}
	ci, ok := resp.Request.Context().Value(infoCtxKey{}).(*callInfo)
	if !ok || !ci.ready.Load() {
		return Info{}, false
	}
	return ci.info, true
}

// withInfo records on resp which call of o it answers, for ResponseInfo, in
// the context of resp's Request, which keeps what it held (a redirect's mark).
func withInfo(resp *http.Response, o *op) {
	ci := &o.info // no allocation of its own: it lives as long as o
	ci.info = Info{Key: o.key, Journaled: o.rec != nil}
	if o.rec != nil {
		ci.info.OperationID = o.rec.OperationID
	}
	ci.ready.Store(true)
	sent := resp.Request
	if sent != nil && sent.Context().Value(infoCtxKey{}) == ci {
		return // the attempt's own request, which carries it
	}
	if sent == nil {
		sent = o.req
	}
	resp.Request = sent.WithContext(context.WithValue(sent.Context(), infoCtxKey{}, ci))
}
