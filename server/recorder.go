// recorder.go is the ResponseWriter the handler writes to: every byte goes straight to the
// client, and a copy, up to Options.MaxResponseBytes, is kept for the Store. It notes what
// makes an answer unreplayable: a body over the cap, a Flush, a Hijack.

package server

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"strings"
)

// recorder captures the response written through it. It is used by one handler goroutine
// at a time, as a ResponseWriter is.
type recorder struct {
	w       http.ResponseWriter
	limit   int64
	status  int         // the final status written, 0 before
	header  http.Header // a copy of the header at WriteHeader
	body    bytes.Buffer
	written int64 // body bytes written, kept or not

	overflow, flushed, hijacked bool
}

func newRecorder(w http.ResponseWriter, limit int64) *recorder {
	return &recorder{w: w, limit: limit}
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader passes the status on; the first final one (not 1xx) is the one kept, with a
// copy of the header as it was sent.
func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 && !rec.hijacked && (status >= 200 || status == http.StatusSwitchingProtocols) {
		rec.status = status
		rec.header = rec.w.Header().Clone()
	}
	rec.w.WriteHeader(status)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 && !rec.hijacked {
		rec.WriteHeader(http.StatusOK)
	}
	n, err := rec.w.Write(p)
	kept := p
	if errors.Is(err, http.ErrContentLength) || errors.Is(err, http.ErrBodyNotAllowed) {
		// net/http refused these bytes (past a declared Content-Length, or a body on a 204
		// or 304): they never reach any client, so they are not replayed either. Any
		// other error (the client went away) does not change the handler's answer.
		kept = p[:n]
	}
	rec.written += int64(len(kept))
	if !rec.overflow {
		if int64(rec.body.Len()+len(kept)) > rec.limit {
			rec.overflow = true
			rec.body = bytes.Buffer{} // never kept: drop what we had
		} else {
			rec.body.Write(kept)
		}
	}
	return n, err
}

// Flush marks the answer streamed (not replayable: see the package doc) and flushes it.
func (rec *recorder) Flush() { _ = rec.FlushError() }

// FlushError is Flush for http.ResponseController, reporting whether the writer below
// could flush.
func (rec *recorder) FlushError() error {
	if rec.status == 0 && !rec.hijacked {
		rec.WriteHeader(http.StatusOK)
	}
	rec.flushed = true
	return http.NewResponseController(rec.w).Flush()
}

// Hijack marks the answer hijacked (not replayable) and hands the connection over.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(rec.w).Hijack()
	if err == nil {
		rec.hijacked = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the writer below for deadlines and the like.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// finalStatus is the status the client got: 200 for a handler that wrote nothing, as
// net/http answers.
func (rec *recorder) finalStatus() int {
	if rec.status == 0 && !rec.hijacked {
		return http.StatusOK
	}
	return rec.status
}

// unreplayable says why the answer cannot be replayed, or "".
func (rec *recorder) unreplayable() string {
	switch {
	case rec.hijacked:
		return UnreplayableHijacked
	case rec.flushed:
		return UnreplayableStreamed
	case rec.overflow:
		return UnreplayableTooLarge
	}
	return ""
}

// response builds what is stored for the answer, dropping the header fields in unstored.
// It hands over the recorder's own copies (the header snapshot, the body buffer), so it
// is called once, after the handler returned: the answer is copied once here, on its way
// to the client, and the Store keeps it as it must (a copy in memory, or its encoding).
func (rec *recorder) response(unstored map[string]bool) *Response {
	status := rec.finalStatus()
	if why := rec.unreplayable(); why != "" {
		return &Response{Status: status, Unreplayable: why}
	}
	h := rec.header
	if h == nil { // nothing written: net/http sends the header as it is now
		if h = rec.w.Header().Clone(); h == nil {
			h = http.Header{}
		}
	}
	// Names are compared canonically: a handler may set a field under any spelling of its
	// name (w.Header()["set-cookie"]), and net/http sends it all the same.
	canon := textproto.CanonicalMIMEHeaderKey
	// Fields the Connection field names are hop-by-hop too (RFC 9110 section 7.6.1).
	var named map[string]bool
	for k, vs := range h {
		if canon(k) != "Connection" {
			continue
		}
		if named == nil {
			named = map[string]bool{}
		}
		for _, v := range vs {
			for f := range strings.SplitSeq(v, ",") {
				named[canon(strings.TrimSpace(f))] = true
			}
		}
	}
	for k := range h {
		if ck := canon(k); unstored[ck] || named[ck] {
			delete(h, k)
		}
	}
	return &Response{Status: status, Header: h, Body: rec.body.Bytes()}
}
