// server.go holds Server and its lifecycle, as net/http/httptest does: NewServer or Listen
// start it, Close stops it and waits for in-flight handlers. The endpoints are in
// payments.go and create.go; idempotency.go puts POST /payments behind package server's
// middleware.

package testserver

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
)

// Defaults for the zero Options.
const (
	// DefaultKeyHeader is the idempotency key header, as the IETF draft names it.
	DefaultKeyHeader = "Idempotency-Key"
	// DefaultKeyTTL is how long a stored result is replayed: 24 hours, as Stripe keeps keys.
	DefaultKeyTTL = 24 * time.Hour
	// DefaultLease is how long a key stays in progress without a heartbeat (renewed every
	// third of it while the payment runs). A 409's Retry-After is what is left of the
	// holder's lease rounded up to whole seconds, so with one second it is always 1.
	DefaultLease = time.Second
	// DefaultMaxBodyBytes bounds a POST /payments body: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
)

// closeGrace is how long Close waits for in-flight requests before it closes their
// connections under them.
const closeGrace = 5 * time.Second

// Options configures a Server. The zero value (or nil) works: key optional, 24 h TTL, no
// random faults, quiet. NewServer and Listen copy it; changing it later has no effect.
type Options struct {
	// KeyHeader is the header that carries the idempotency key; "" means DefaultKeyHeader.
	KeyHeader string
	// RequireKey makes POST /payments without a key fail with 400.
	RequireKey bool
	// IgnoreKeys makes the server a provider that does not honour idempotency keys: every
	// POST /payments charges, whatever its key, and nothing is replayed; RequireKey, KeyTTL
	// and Lease then do not apply. GET /payments?reference=… still finds the payments made
	// for a business reference: what a client reconciles against (idem.Options.Reconcile).
	IgnoreKeys bool
	// KeyTTL is how long a stored result is replayed after it was stored (a key stuck in
	// progress: after its claim); zero or negative means DefaultKeyTTL. Measured on the
	// clock set with Server.SetNow, unless Store has its own.
	KeyTTL time.Duration
	// Lease is how long a key in progress is held without a heartbeat (server.Options.Lease):
	// a 409 carries what is left of it as Retry-After, in whole seconds, at least 1. Zero
	// or negative means DefaultLease; it is cut to KeyTTL if longer.
	Lease time.Duration
	// Store holds the idempotency records; nil means a server/memstore on the clock set
	// with Server.SetNow. A shared Store (Redis, PostgreSQL) lets several servers answer
	// for one key; each keeps its own ledger, and its own payments unless they share
	// Payments too.
	Store server.Store
	// Payments is where the server keeps the payments it makes, and where GET /payments,
	// GET /payments/{id} and the recovery of a key stuck in progress (idempotency.go) look
	// them up; nil means a registry of the server's own. Servers that share a Store, as the
	// instances of one service do, should share one Payments too, as such instances share
	// their database: a key stuck on one server (its completion failed, or its holder was
	// cut off from the Store) is then recovered on another from the payment it made. With
	// a registry each, the other server finds no payment and makes it again. Each server's
	// Ledger counts the payments that server made, whichever registry holds them.
	Payments *Payments
	// Plan draws a random fault for each POST /payments not covered by Server.Script; nil
	// means no random faults. The Server draws from it; share one Plan between servers only
	// if one sequence of draws for all of them is what you want.
	Plan *Plan
	// MaxBodyBytes bounds a POST /payments body; larger bodies get 413 and nothing is
	// stored. Zero or negative means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logf, if set, receives one line per POST /payments and net/http's server errors. The
	// Authorization header is never logged. It may be called concurrently.
	Logf func(format string, args ...any)
	// Identity, if set, returns the client identity a POST /payments request's idempotency
	// key is scoped by: an account or tenant, e.g. from a header, as Stripe scopes keys by
	// account (the IETF Idempotency-Key draft leaves the scope to the server). "" is the
	// anonymous identity. Then a refreshed token for the same account keeps its keys. nil
	// scopes by the Authorization header, so a new token is a new client. Only a hash of
	// what Identity returns reaches the Store, and it is never logged, so returning a
	// credential is safe. An error answers 403 and runs nothing, as server.Options.Identity
	// does. It may be called concurrently.
	Identity func(r *http.Request) (string, error)
}

// Server is a payments API with server-side idempotency and fault injection, listening on a
// real TCP port. Its methods are safe for concurrent use. The owner must call Close.
type Server struct {
	// URL is the base URL, "http://ipaddr:port", with no trailing slash.
	URL string

	opts       Options // defaults applied; read-only after start
	ln         net.Listener
	srv        *http.Server
	transport  *http.Transport // Client's
	client     *http.Client
	handler    http.Handler
	idempotent http.Handler // handlePayment behind the middleware

	store    server.Store
	mw       *server.Middleware
	track    *tracker // keys claimed or running here, for Recover
	payments *Payments
	ledger   *recorder
	nowFn    atomic.Pointer[func() time.Time]
	holding  atomic.Int64 // requests in a FaultHold wait, for tests

	done      chan struct{} // closed when Close starts
	served    chan struct{} // closed when srv.Serve returned
	closeOnce sync.Once
	handlers  sync.WaitGroup // in-flight handlers; Add only under mu while !closing

	mu      sync.Mutex
	closing bool
	script  []Fault
	release chan struct{} // closed and replaced by ReleaseHolds
	conns   map[net.Conn]http.ConnState
}

// NewServer starts a Server on 127.0.0.1 at a free port. Like httptest.NewServer it panics
// if it cannot listen (or if opts.KeyHeader is not a header name). opts may be nil. The
// caller must call Close.
func NewServer(opts *Options) *Server {
	s, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		panic(err)
	}
	return s
}

// Listen starts a Server on addr, in net.Listen's "host:port" form, for the standalone
// command. It fails if it cannot listen, or if opts.KeyHeader is not a header name. Give a host: URL is built from the listener's address, and a wildcard such as
// ":8080" makes it "http://[::]:8080". opts may be nil. The caller must call Close.
func Listen(addr string, opts *Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("testserver: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveTracked),
		ConnState:         s.trackConn,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(logWriter{s}, "", 0),
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns when Close closes the listener
	}()
	return s, nil
}

// newServer builds a Server that does not listen yet. It fails if the middleware refuses
// the options (a KeyHeader that is not a header name).
func newServer(opts *Options) (*Server, error) {
	s := &Server{
		done:    make(chan struct{}),
		served:  make(chan struct{}),
		release: make(chan struct{}),
		conns:   make(map[net.Conn]http.ConnState),
	}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.KeyHeader == "" {
		s.opts.KeyHeader = DefaultKeyHeader
	}
	if s.opts.KeyTTL <= 0 {
		s.opts.KeyTTL = DefaultKeyTTL
	}
	if s.opts.Lease <= 0 {
		s.opts.Lease = DefaultLease
	}
	s.opts.Lease = min(s.opts.Lease, s.opts.KeyTTL)
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s.SetNow(nil)
	s.store = s.opts.Store
	if s.store == nil {
		s.store = memstore.New(&memstore.Options{Now: s.now})
	}
	s.track = newTracker()
	s.payments = s.opts.Payments
	if s.payments == nil {
		s.payments = NewPayments()
	}
	s.ledger = newRecorder()
	var err error
	if s.handler, err = s.routes(); err != nil {
		return nil, err
	}
	s.transport = &http.Transport{} // no proxy: the server is on loopback
	s.client = &http.Client{Transport: s.transport}
	return s, nil
}

// Client returns a plain *http.Client for the server, without idem and without retries of
// its own; the same client on every call. Close closes its idle connections.
func (s *Server) Client() *http.Client { return s.client }

// Handler returns the API's handler, to mount on another server. Requests it serves share
// this Server's keys, ledger and faults; Close wakes their holds and slow responses but does
// not wait for them.
func (s *Server) Handler() http.Handler { return s.handler }

// Script queues faults for the next len(faults) POST /payments requests, in arrival order,
// ahead of any Plan. Fault{} lets one request through untouched.
func (s *Server) Script(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, faults...)
}

// ReleaseHolds ends every FaultHold and FaultSlowResponse wait in progress now; held
// requests go on to be processed. Later holds wait their full delay again.
func (s *Server) ReleaseHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// Ledger returns a snapshot of the ledger.
func (s *Server) Ledger() Ledger { return s.ledger.snapshot() }

// SetNow sets the clock for key expiry, leases and Retry-After dates; nil restores
// time.Now. A Store from Options.Store keeps its own clock.
func (s *Server) SetNow(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.nowFn.Store(&now)
}

// Close stops the server: it closes the listener and idle connections, wakes every hold
// (the held request is answered 503 and its key freed) and slow response (answered at
// once), and waits for in-flight requests to be answered; a request still running after a
// few seconds (a client stalled half-way through its body, say) has its connection closed
// under it. Close never hangs on a fault and may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		close(s.done)
		// A connection that never sent a request would hold Shutdown for 5 s; httptest
		// closes these too.
		for c, st := range s.conns {
			if st == http.StateNew {
				_ = c.Close()
			}
		}
		s.mu.Unlock()
		s.transport.CloseIdleConnections()

		// Shutdown, unlike Close, lets answers already written reach the client.
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.logf("testserver: requests still running after %v; closing their connections", closeGrace)
			_ = s.srv.Close()
		}
		s.handlers.Wait() // handlers of hijacked connections, which Shutdown does not track
		<-s.served
		// Store calls the middleware still repeats (its Store is down) get a moment to
		// land, and are then given up: their records lapse and are recovered.
		mctx, mcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer mcancel()
		_ = s.mw.Shutdown(mctx)
	})
}

// serveTracked counts in-flight handlers for Close.
func (s *Server) serveTracked(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		shuttingDown().write(w)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()
	s.handler.ServeHTTP(w, r)
}

// trackConn follows connection states so Close can close idle and new connections at once,
// as httptest does, instead of waiting for them.
func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		if s.closing {
			_ = c.Close()
		}
		s.conns[c] = st
	case http.StateActive:
		s.conns[c] = st
	case http.StateHijacked, http.StateClosed:
		delete(s.conns, c)
	}
}

// now returns the server's time.
func (s *Server) now() time.Time { return (*s.nowFn.Load())() }

// logf logs through Options.Logf, if set.
func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// logWriter feeds net/http's server error log into Options.Logf; quiet without it.
type logWriter struct{ s *Server }

func (lw logWriter) Write(p []byte) (int, error) {
	if lw.s.opts.Logf != nil {
		lw.s.opts.Logf("%s", p)
	}
	return len(p), nil
}
