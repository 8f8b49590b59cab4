// This file holds the structured logging helpers. Logging is silent unless
// Options.Logger is set. Records carry the method, the URL without userinfo
// or query, the idempotency key and the operation ID; never a body or a
// header value, and error texts are masked (safeErr) before they are logged.

package idem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

func (t *Transport) log(ctx context.Context, level slog.Level, msg string, o *op, args ...any) {
	l := t.cfg.Logger
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	attrs := []any{"method", method(o.req), "url", logURL(o.req.URL)}
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
// fragment of u and the values of sensitive headers in h. Errors from a base
// RoundTripper are free-form text: a proxy or SDK may quote the URL or a
// header in them.
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
