// onecommit_handler.go runs a handler in its claim's transaction (OneCommit.Wrap): the
// answer is held back until the claim, the handler's effects and the stored answer have
// committed together, then written; TxFrom hands the transaction to the handler.

package pgstore

import (
	"bytes"
	"context"
	"net/http"
	"net/textproto"

	"github.com/jackc/pgx/v5"

	"github.com/idem-go/idem/server"
)

type txKey struct{}

// TxFrom returns the transaction of the request whose context is ctx, inside a handler
// that OneCommit.Wrap runs, and false elsewhere. The handler does its effects in it and
// neither commits nor rolls it back: Wrap does. Like any pgx.Tx it is not safe for
// concurrent use.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Wrap returns next run in its claim's transaction, under a server.Middleware whose Store
// is o: mw.Wrap(o.Wrap(next)). next finds the transaction with TxFrom and writes its
// answer as usual; Wrap holds the answer back (so next cannot stream: there is no Flush,
// and 1xx responses are dropped), then:
//
//   - a status below 500: the answer is stored in the transaction (its header without
//     Set-Cookie and hop-by-hop fields), which commits, and only then is it written. The
//     claim, next's effects and the answer are one commit; every retry replays it.
//   - a status of 500 or more, or a panic: the transaction rolls back, so nothing next did
//     happened, and the key is free; the 5xx is written (a panic goes on to net/http).
//   - a commit that fails or gets no answer within Options.StatementTimeout: the outcome
//     is unknown, so the client gets 503 with Retry-After: 1 and no other answer; its
//     retry replays the stored answer if the commit landed, and runs next again if it
//     did not.
//
// Wrap tells the middleware that the record is settled here (server.MarkCompleted). Under
// another Store, or outside the middleware, it answers 500 without running next.
func (o *OneCommit) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		hold, ok := server.HoldFrom(ctx)
		h, st := o.state(hold.Token)
		if !ok || st != txOpen {
			server.MarkCompleted(ctx) // nothing ran: release the claim, if any
			http.Error(w, "pgstore: OneCommit.Wrap runs only inside a server.Middleware whose Store is that OneCommit",
				http.StatusInternalServerError)
			return
		}
		server.MarkCompleted(ctx)
		bw := &heldWriter{header: http.Header{}}
		settled := false
		defer func() {
			if !settled { // next panicked
				o.rollback(ctx, h.tx)
				o.end(h, txRolledBack)
			}
		}()
		next.ServeHTTP(bw, r.WithContext(context.WithValue(ctx, txKey{}, h.tx)))
		resp := bw.response()
		if resp.Status >= 500 {
			o.rollback(ctx, h.tx)
			o.end(h, txRolledBack)
			settled = true
			bw.writeTo(w, resp)
			return
		}
		// Bounded, as every Store statement is: a commit without an answer is an unknown
		// outcome, answered below, not a request that hangs.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.s.opts.StatementTimeout)
		err := o.commit(cctx, hold.Token, h, func(db db) error { return o.s.complete(db, hold.Scope, hold.Token, resp, o.s.opts.TTL) })
		cancel()
		settled = true
		if err != nil {
			if o.s.opts.Logger != nil {
				o.s.opts.Logger.Warn("pgstore: the one-commit transaction did not commit, or its outcome is unknown; answering 503", "err", err)
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Outcome unknown","status":503,` +
				`"detail":"The request's transaction may not have committed; retry with the same idempotency key."}`))
			return
		}
		bw.writeTo(w, resp)
	})
}

// heldWriter keeps a handler's answer until its transaction has committed. It is used by
// one handler goroutine, as a ResponseWriter is.
type heldWriter struct {
	header http.Header
	sent   http.Header // header at WriteHeader
	status int
	body   bytes.Buffer
}

func (hw *heldWriter) Header() http.Header { return hw.header }

func (hw *heldWriter) WriteHeader(status int) {
	if hw.status == 0 && status >= 200 {
		hw.status, hw.sent = status, hw.header.Clone()
	}
}

func (hw *heldWriter) Write(p []byte) (int, error) {
	if hw.status == 0 {
		hw.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(hw.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return hw.body.Write(p)
}

// unstored are header fields never stored or replayed (server.DefaultUnstoredHeaders and
// the hop-by-hop fields of RFC 9110 section 7.6.1).
var unstored = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range append(server.DefaultUnstoredHeaders(), "Connection", "Keep-Alive", "Proxy-Connection",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade") {
		m[textproto.CanonicalMIMEHeaderKey(f)] = true
	}
	return m
}()

// response is the answer to store: 200 with the header as it is if nothing was written.
func (hw *heldWriter) response() *server.Response {
	status, sent := hw.status, hw.sent
	if status == 0 {
		status, sent = http.StatusOK, hw.header
	}
	h := http.Header{}
	for k, vs := range sent {
		if !unstored[textproto.CanonicalMIMEHeaderKey(k)] {
			h[k] = append([]string(nil), vs...)
		}
	}
	return &server.Response{Status: status, Header: h, Body: hw.body.Bytes()}
}

// writeTo writes the held answer to w: the full header as next set it, then resp's body.
func (hw *heldWriter) writeTo(w http.ResponseWriter, resp *server.Response) {
	sent := hw.sent
	if sent == nil {
		sent = hw.header
	}
	for k, vs := range sent {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body) // a client gone away gets the replay when it retries
}

// bodyAllowed reports whether a response with status may carry a body (RFC 9110 sections
// 6.4.1, 15.3.5 and 15.4.5).
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}
