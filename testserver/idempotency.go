// idempotency.go puts POST /payments behind package server's middleware, the same one a real
// service uses: it builds the middleware from Options, scopes keys by identity, turns the
// middleware's Observer calls into the ledger's counters and the log lines "idem demo"
// reads, and recovers a key stuck in progress by looking its payment up (Recover).

package testserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idem-go/idem/server"
)

// newMiddleware returns the idempotency middleware for s's options.
func (s *Server) newMiddleware() (*server.Middleware, error) {
	return server.New(&server.Options{
		Store:        s.store,
		KeyHeader:    s.opts.KeyHeader,
		Methods:      []string{http.MethodPost},
		Required:     s.opts.RequireKey,
		Identity:     s.identity,
		MaxBodyBytes: s.opts.MaxBodyBytes,
		Lease:        s.opts.Lease,
		TTL:          s.opts.KeyTTL,
		Recover:      s.recoverPayment,
		Observer:     observer{s},
		Logger: slog.New(slog.NewTextHandler(logWriter{s}, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{} // Logf's own lines carry no time either
				}
				return a
			},
		})),
	})
}

// identity is who sent r, for the middleware to scope its key by (it keeps only a hash):
// Options.Identity's answer, or else the Authorization header. The prefixes keep the two
// apart; "" is the anonymous identity of each.
func (s *Server) identity(r *http.Request) (string, error) {
	if s.opts.Identity != nil {
		id, err := s.opts.Identity(r)
		return "id:" + id, err
	}
	return "auth:" + r.Header.Get("Authorization"), nil
}

// exchange is what the server knows about one POST /payments while the middleware and the
// handler work on it: the fault it drew and its body as the middleware read it. It travels
// in the request's context, from handleCreate to the Observer and the handler.
type exchange struct {
	fault Fault
	key   string // the key header as sent, for logs
	body  *captured

	pending bool // claimed, its handler not started yet; guarded by tracker.mu
}

type exchangeKey struct{}

// exchangeFrom returns the exchange of the request whose context is ctx.
func exchangeFrom(ctx context.Context) *exchange {
	if ex, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		return ex
	}
	return &exchange{body: &captured{}}
}

// reference returns the payment reference in the body read so far, or "" if there is none
// to read: for logs only, the handler validates the body.
func (ex *exchange) reference() string {
	var p struct {
		Reference string `json:"reference"`
	}
	_ = json.Unmarshal(ex.body.bytes(), &p)
	return p.Reference
}

// logKey returns the key as the log shows it: the header value, without the quotes and
// escapes of an RFC 8941 sf-string ("abc" and abc are one key).
func (ex *exchange) logKey() string {
	k := strings.TrimSpace(ex.key)
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(k[1 : len(k)-1])
	}
	return k
}

// outcome logs what the middleware decided for r's key, in the form "idem demo" parses:
// `POST /payments key "K" reference "R": new, lost`.
func (s *Server) outcome(r *http.Request, what string) {
	ex := exchangeFrom(r.Context())
	s.logf("POST /payments key %q reference %q: %s, %v", ex.logKey(), ex.reference(), what, ex.fault)
}

// observer feeds the middleware's Observer calls into the ledger and the log. It is safe
// for concurrent use.
type observer struct{ s *Server }

func (o observer) Claimed(r *http.Request) {
	o.s.track.claimed(exchangeFrom(r.Context()))
	o.s.outcome(r, "new")
}

func (o observer) Replayed(r *http.Request, _ time.Duration) {
	o.s.ledger.update(func(l *Ledger) { l.Replays++ })
	o.s.outcome(r, "replay")
}

func (o observer) Conflict(r *http.Request, _ bool) {
	o.s.ledger.update(func(l *Ledger) { l.InProgress++ })
	o.s.outcome(r, "in progress")
}

func (o observer) Mismatch(r *http.Request) {
	o.s.ledger.update(func(l *Ledger) { l.Mismatches++ })
	o.s.outcome(r, "fingerprint mismatch")
}

func (o observer) LeaseLost(r *http.Request) {
	o.s.outcome(r, "lease lost")
}

func (o observer) Recovered(r *http.Request, rec server.Recovery) {
	if rec.Rerun {
		o.s.outcome(r, "new") // the payment runs (again) for this request
		return
	}
	o.s.logf("POST /payments key %q: stuck in progress, recovered: %v", exchangeFrom(r.Context()).logKey(), rec)
}

func (observer) Stored(*http.Request, int) {}

func (o observer) StoreError(_ *http.Request, err error) {
	o.s.ledger.update(func(l *Ledger) { l.StoreErrors++ })
	o.s.logf("POST /payments: idempotency store: %v", err)
}

func (o observer) StoreUncertain(_ *http.Request, call string, err error) {
	o.s.ledger.update(func(l *Ledger) { l.StoreCalls["uncertain "+call]++ })
	o.s.logf("POST /payments: idempotency store: %s got no answer (repeated with its token): %v", call, err)
}

func (o observer) StoreResolved(_ *http.Request, call, how string) {
	o.s.ledger.update(func(l *Ledger) { l.StoreCalls[call+" "+how]++ })
}

// recoverPayment is the middleware's Recover hook, for a key whose holder's lease lapsed
// before it answered (its handler stalled past the lease, the clock jumped, or its
// completion failed): if a payment was made under the key, its answer is stored and
// replayed; if the key's handler may still be running here, the request gets 409 and the
// next one asks again; otherwise the payment was never made, and the handler runs again.
// It knows the payments in the server's registry (Options.Payments: its own, or shared by
// the servers of a cluster), while the registry lives; but whether a handler may still be
// running it knows for this server only: a holder on another server whose lease lapsed
// while its handler ran on (cut off from the Store) is not seen here.
func (s *Server) recoverPayment(_ context.Context, info server.RecoverInfo) (server.Recovery, error) {
	id := info.Scope.ID()
	// The tracker first: a handler that ended made its payment before it ended, so the
	// lookup below sees it.
	if s.track.busy(id) {
		return server.Recovery{}, nil
	}
	p, ok := s.payments.byScope(id)
	if !ok {
		return server.Recovery{Rerun: true}, nil
	}
	res := paymentResult(p)
	return server.Recovery{Response: &server.Response{
		Status: res.status, Header: res.header.Clone(), Body: res.body,
	}}, nil
}

// tracker knows which keys may have a handler running here: claimed ones whose handler has
// not started yet (their scope is not known before it starts), and running ones by
// Scope.ID. It is safe for concurrent use.
type tracker struct {
	mu      sync.Mutex
	pending int
	running map[string]int
}

func newTracker() *tracker { return &tracker{running: map[string]int{}} }

// claimed notes that ex's request claimed its key; its handler is about to start.
func (t *tracker) claimed(ex *exchange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending++
	ex.pending = true
}

// start notes that ex's handler runs for the record id; the caller must call end.
func (t *tracker) start(ex *exchange, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ex.pending {
		ex.pending = false
		t.pending--
	}
	t.running[id]++
}

// end notes that a handler for id returned.
func (t *tracker) end(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[id]--; t.running[id] <= 0 {
		delete(t.running, id)
	}
}

// busy reports whether a handler for id may be running or about to run.
func (t *tracker) busy(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending > 0 || t.running[id] > 0
}
