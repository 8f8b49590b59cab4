// This file builds each attempt's request (attempt.go sends it): a copy of
// the caller's request carrying the idempotency key, the AttemptHeader and a
// fresh reader over the journaled body.

package idem

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
)

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
// the same bytes, the idempotency key, and the AttemptHeader's value unless
// it is "". As golang.org/x/oauth2's transport does, it copies the request
// and its header map, not the URL or the header values, which neither idem
// nor a base RoundTripper changes (the values are capped, so an append
// copies them). The body reader and the new values live in st, the attempt's.
func (o *op) newRequest(ctx context.Context, keyHeader, attemptValue string, st *attemptState) *http.Request {
	r := o.req.WithContext(ctx)
	r.Header = make(http.Header, len(o.req.Header)+2)
	for k, v := range o.req.Header {
		if (o.key != "" && strings.EqualFold(k, keyHeader)) || (attemptValue != "" && strings.EqualFold(k, AttemptHeader)) {
			continue // replaced below
		}
		r.Header[k] = v[:len(v):len(v)]
	}
	switch {
	case o.stream != nil:
		r.Body, r.GetBody = o.stream, nil
	case len(o.body) > 0:
		body := o.body
		r.ContentLength = int64(len(body))
		// net/http writes a body it knows to be in memory (a *bytes.Reader,
		// also inside io.NopCloser) with its headers, in one write; any
		// other reader has the headers flushed first, a second syscall.
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if o.noReplay {
			// net/http re-sends a request with a key header and a GetBody once, unseen,
			// when a kept-alive connection breaks after writing it; against a server
			// that ignores keys that is a second effect nothing reconciled first.
			r.GetBody = nil
		}
		st.reader.Reset(body)
		r.Body = io.NopCloser(&st.reader)
	case o.noReplay:
		// http.NoBody would make the request replayable to net/http (see above); an
		// empty reader of its own is not, at the cost of a chunked empty body on HTTP/1.1.
		r.Body, r.GetBody, r.ContentLength = io.NopCloser(bytes.NewReader(nil)), nil, 0
	default:
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
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
