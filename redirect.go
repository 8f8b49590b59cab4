// This file holds what idem does when a journaled operation is answered with
// a redirect (RFC 9110 section 15.4): a 307 or 308 moves the record to its
// Location and marks the response, so that the hop an http.Client sends runs
// as the same operation; a 301, 302 or 303 settles it.

package idem

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/idem-go/idem/journal"
)

// maxRedirects is net/http's default redirect limit: a 307 or 308 that is the
// 10th redirect of its chain, through a Client or in one Resume pass, settles
// its operation.
const maxRedirects = 10

// hopMark is carried by a 3xx response that idem returned for a journaled
// operation, for the hop net/http builds from it: in its Request's context,
// since wrappers replace the Body.
type hopMark struct {
	t    *Transport   // only this Transport may take the hop as its operation's
	rec  *Record      // the operation's record, as the response left it (for Store.Reload)
	lock journal.Name // and its name, claimed while the hop runs
	key  string
	// location is the Location the hop must go to, resolved and journaled
	// as a URL is (storedURL).
	location string
	// follows is set for a 307 or 308: the hop continues the operation.
	// Otherwise (301, 302, 303) the operation settled and the hop is a
	// request of its own.
	follows bool
}

type hopCtxKey struct{}

// markOf returns the mark that t put on resp, or nil.
func (t *Transport) markOf(resp *http.Response) *hopMark {
	if resp == nil || resp.Request == nil {
		return nil
	}
	m, _ := resp.Request.Context().Value(hopCtxKey{}).(*hopMark)
	if m == nil || m.t != t {
		return nil
	}
	return m
}

// redirectLocation resolves resp's Location against the URL of the request
// that got it, as net/http's Client does; nil when there is none to follow
// (no Location, one that does not parse, or one that is not http or https).
func redirectLocation(sent *url.URL, resp *http.Response) *url.URL {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	u, err := sent.Parse(loc)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil
	}
	return u
}

// redirected marks a redirect answered to a journaled operation for its hop,
// and reports whether the operation moved rather than settled. A 307 or 308
// moves a pending record to the Location, durably, before the response is
// returned, unless it is the 10th of its chain; a 301, 302 or 303 settles it.
func (t *Transport) redirected(ctx context.Context, o *op, resp *http.Response) (moved bool) {
	u := redirectLocation(o.req.URL, resp)
	if u == nil {
		return false
	}
	loc, droppedQuery := storedURL(u, t.cfg.sensitiveQuery)
	m := &hopMark{t: t, rec: stub(o.rec), lock: journal.NameOf(o.rec), key: o.rec.Key, location: loc,
		follows: resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect}
	sent := resp.Request
	if sent == nil {
		sent = o.req
	}
	resp.Request = sent.WithContext(context.WithValue(sent.Context(), hopCtxKey{}, m))
	if !m.follows {
		return false
	}
	if n := o.redirects + redirectsBefore(o.req) + 1; n >= maxRedirects && o.rec.State == StatePending {
		// The redirect limit, a Client's too: the 3xx, the last answer,
		// settles the operation, or every Resume would walk the chain again.
		t.log(ctx, slog.LevelWarn, "idem: redirect limit reached, operation settled with the redirect", o,
			"status", resp.StatusCode, "redirects", n, "location", loc)
		return false
	}
	if o.rec.State == StatePending {
		t.move(ctx, o, u, loc, droppedQuery, resp.StatusCode)
	}
	return true
}

// move points a pending record at a redirect's Location and commits it.
func (t *Transport) move(ctx context.Context, o *op, u *url.URL, loc string, droppedQuery []string, status int) {
	rec := o.rec
	if orig, err := url.Parse(rec.URL); err != nil || !sameDomain(orig, u) {
		// net/http does not send these to another domain (see
		// http.Client's redirects), so Resume does not ask for them there.
		rec.Dropped = slices.DeleteFunc(slices.Clone(rec.Dropped), crossDomainDropped)
	}
	rec.Location, rec.DroppedQuery = loc, droppedQuery
	_, err := journal.Apply(rec, journal.EventRetry, journal.Change{Status: status})
	if err == nil {
		err = t.journal.Update(ctx, rec, journal.Durable)
	}
	if err != nil {
		// The record still names the URL that answered the redirect; sent
		// there again, the same key meets the same redirect.
		t.log(ctx, slog.LevelWarn, "idem: redirect not recorded", o, "status", status, "err", t.safeErr(o, err))
	}
	t.crash(crashRedirected)
}

// redirectsBefore counts the redirects an http.Client followed to build
// req, as the via of its CheckRedirect does: req.Response is the redirect
// that made it, and that response's Request the request before. It counts
// no further than maxRedirects.
func redirectsBefore(req *http.Request) int {
	n := 0
	for r := req; n < maxRedirects && r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
		n++
	}
	return n
}

// crossDomainDropped reports whether net/http's Client leaves header name
// out of a redirect to another domain.
func crossDomainDropped(name string) bool {
	switch name {
	case "Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization", "Proxy-Authenticate":
		return true
	}
	return false
}

// sameDomain reports whether net/http's Client keeps credentials on a
// redirect from initial to dest: dest's host is initial's, or a subdomain of
// it. A host that is not plain ASCII counts as another domain.
func sameDomain(initial, dest *url.URL) bool {
	ih, dh := strings.ToLower(initial.Hostname()), strings.ToLower(dest.Hostname())
	for _, c := range ih + dh {
		if c >= 0x80 {
			return false
		}
	}
	if ih == dh {
		return true
	}
	return !strings.ContainsAny(dh, ":%") && strings.HasSuffix(dh, "."+ih)
}

// unbound turns the hop that follows a 301, 302 or 303 into a request of its
// own, without the settled operation's WithOperationID, WithKey and key
// header, in its context and in co: its method alone says whether it is
// journaled.
func (m *hopMark) unbound(req *http.Request, keyHeader string, co *callOptions) *http.Request {
	co.key, co.hasKey, co.opID, co.hasOpID = "", false, "", false
	ctx := context.WithValue(context.WithValue(req.Context(), opIDCtx, nil), keyCtx, nil)
	r := req.WithContext(ctx)
	if vs := headerValues(r.Header, keyHeader); len(vs) == 1 && vs[0] == m.key {
		r.Header = r.Header.Clone()
		for k := range r.Header {
			if strings.EqualFold(k, keyHeader) {
				delete(r.Header, k)
			}
		}
	}
	return r
}

// continueHop runs the hop that follows a 307 or 308 as its operation: the
// same record, key and bytes. A hop whose method, URL, body or key is not
// the one the server and the journal name (a CheckRedirect rewrote it) is
// not sent.
func (t *Transport) continueHop(req *http.Request, m *hopMark, lim limits) (*http.Response, error) {
	ctx := req.Context()
	b, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	b.close()
	if err := t.journal.Claim(ctx, m.lock); err != nil {
		return nil, err
	}
	defer t.journal.Release(m.lock)
	rec, err := t.journal.Reload(ctx, m.rec)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("idem: redirect of operation (key %s) to %s: its record is no longer in the journal; nothing sent",
			m.key, m.location)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	u, _ := storedURL(req.URL, t.cfg.sensitiveQuery)
	keys := headerValues(req.Header, t.cfg.KeyHeader)
	if b.tooLarge || method(req) != rec.Method || u != m.location || bodySum(b.buf) != rec.BodySHA256 ||
		len(keys) > 1 || len(keys) == 1 && keys[0] != rec.Key {
		return nil, unsent(rec, fmt.Errorf("%w: operation %q (key %s) was redirected to %s %s; the hop is %s %s",
			ErrRedirectChanged, rec.OperationID, rec.Key, rec.Method, m.location, method(req), u))
	}
	// The fingerprint is the record's own: only the state can refuse it.
	if err := t.reuse(rec, rec.Fingerprint(), rec.Key, false); err != nil {
		return nil, err
	}
	// The hop goes where the journal says the operation is; a settled one is
	// replayed only where it settled.
	if rec.State == StateSettled && rec.Target() != m.location {
		return nil, &AlreadySettledError{OperationID: rec.OperationID, Key: rec.Key, Status: rec.Status, Settled: rec.Updated}
	}
	if req, err = t.toTarget(req, rec); err != nil {
		return nil, unsent(rec, err)
	}
	if rec.State == StateFailed {
		if _, err := journal.Apply(rec, journal.EventRepend, journal.Change{Body: b.buf}); err != nil {
			return nil, err
		}
		if err := t.journal.Update(ctx, rec, journal.Durable); err != nil {
			return nil, fmt.Errorf("idem: write-ahead failed, request not sent: %w", err)
		}
		t.stateChanged(StateFailed, StatePending)
	}
	t.crash(crashHop)
	// Sent where the server pointed, it may act there: never "failed" from
	// here on, only pending, as a resumed operation.
	return t.run(ctx, &op{req: req, method: rec.Method, rec: rec, key: rec.Key, body: b.buf, maybeSent: true, limits: lim,
		reconcile: t.reconciler(ctx)})
}

// unsent returns err for a call that sent nothing of rec: inside a
// *PendingError while rec is pending.
func unsent(rec *Record, err error) error {
	if rec.State != StatePending {
		return err
	}
	return &PendingError{Key: rec.Key, OperationID: rec.OperationID, Attempts: rec.Attempts,
		LastStatus: rec.Status, Err: err, NextAttempt: rec.NextAttempt}
}

// toTarget returns the request a call sends for an operation already in the
// journal: req itself when it names rec's target, else req pointed at the
// target (where a 307 or 308 moved it), as a hop there would be: same body,
// key and headers, its Host override kept on the same host, and on another
// domain without the headers net/http drops there. req's values of
// rec.DroppedQuery are put back, on the same domain only; one it cannot give
// is ErrSensitiveQueryMissing, nothing sent.
func (t *Transport) toTarget(req *http.Request, rec *Record) (*http.Request, error) {
	target := rec.Target()
	if u, _ := storedURL(req.URL, t.cfg.sensitiveQuery); u == target {
		return req, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%w: journaled URL: %w", ErrInvalidRequest, err)
	}
	same := sameDomain(req.URL, u)
	if len(rec.DroppedQuery) > 0 {
		var q []string
		if u.RawQuery != "" {
			q = append(q, u.RawQuery)
		}
		for _, name := range rec.DroppedQuery {
			n := len(q)
			if same {
				q = appendParam(q, req.URL.RawQuery, name)
			}
			if len(q) == n {
				return nil, fmt.Errorf("%w: %s, named by %s (operation %q): this call cannot give it there",
					ErrSensitiveQueryMissing, name, target, rec.OperationID)
			}
		}
		u.RawQuery = strings.Join(q, "&")
	}
	r := req.WithContext(req.Context())
	r.URL = u
	if u.Host != req.URL.Host {
		r.Host = ""
	}
	if !same {
		r.Header = req.Header.Clone()
		for k := range r.Header {
			if crossDomainDropped(http.CanonicalHeaderKey(k)) {
				delete(r.Header, k)
			}
		}
	}
	return r, nil
}

// appendParam appends to q the parameters of a raw query whose name, decoded
// as stripQuery decodes it, is name, with their bytes as sent.
func appendParam(q []string, raw, name string) []string {
	for part := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(k); err == nil && n == name {
			q = append(q, part)
		}
	}
	return q
}

// resumedMove reports whether a resumed attempt's response is a 307 or 308
// that moved rec (redirected): Resume sends it again there. One that
// settled rec at the redirect limit did not.
func (t *Transport) resumedMove(resp *http.Response, rec *Record) bool {
	m := t.markOf(resp)
	return m != nil && m.follows && rec.State == StatePending
}
