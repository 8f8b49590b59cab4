// This file holds Transport, the http.RoundTripper at idem's core (client.go
// wraps one): RoundTrip checks a call and decides whether it is journaled;
// the journaled path and its steps are in record.go, one attempt and the
// base it goes through in attempt.go. A zero Transport sets itself up on
// first use.

package idem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// Transport is an http.RoundTripper that makes non-idempotent requests safe to
// retry, across network faults and process restarts. It is safe for
// concurrent use.
//
// For a request whose method is in Options.Methods (POST and PATCH by
// default), or whose context carries WithOperationID or WithKey, and not
// WithoutJournal, RoundTrip:
//
//  1. reads the body (at most Options.MaxBodyBytes) and closes it;
//  2. takes the caller's idempotency key, or mints a random UUID;
//  3. commits key, method, URL (without userinfo, fragment and
//     Options.SensitiveQueryParams), non-sensitive headers and body to the
//     journal, with fsync, before the first byte is sent; sealed if the
//     journal was opened with encryption at rest (Options.Journal);
//  4. sends attempts with that key and the journaled bytes until a final
//     response, retrying as the Classifier, the backoff and the host's
//     RetryBudget allow;
//  5. settles the operation and returns the response, or leaves it pending
//     and returns a *PendingError, which Resume picks up later. A 307 or 308
//     leaves it pending at its Location, unless it is the 10th redirect of
//     its chain, which settles it.
//
// Other requests are retried the same way but not journaled; when their
// attempts run out they return the last response with a nil error, as the
// http.RoundTripper contract asks. Every attempt carries the AttemptHeader
// unless Options.DisableAttemptHeader is set. Per-call options (see
// WithMaxAttempts) travel in the request's context.
//
// RoundTrip never modifies the caller's request, closes its body exactly once
// on every path, and never returns a response together with an error.
//
// The zero Transport is usable, as net/http's is: it is NewTransport(nil,
// nil), set up on its first call (safely for concurrent first calls), with
// the default Options and no journal, so it retries requests that need no
// journal and refuses the others with ErrNoJournal. A nil *Transport is
// not usable.
type Transport struct {
	zero     sync.Once // sets up the zero Transport (setup)
	cfg      *config
	journal  journal.Store // nil: none; also holds the claims on operations
	tags     *tagger       // credential tags under the Store's identity key
	clock    clock
	resumers resumerSet         // background resumers to tell of new pending work
	pending  pendingGauge       // this Transport's share of the Observer's gauge
	budget   *budget            // retry tokens per host
	watch    watcher            // the attempt timeouts
	own      http.RoundTripper  // the base when Options.Base is nil
	crashAt  func(point string) // test hook: die at a crash point (record.go); nil in use
}

// NewTransport returns a Transport that journals to store: a
// *boltjournal.Journal (boltjournal.Open), a *pgjournal.Journal, or any
// journal.Store. A nil store gives a Transport that retries but refuses
// (ErrNoJournal) every request that would need journaling. The Transport
// does not own store; close it after the last call. Sealing records is the
// store's, configured when it was opened (boltjournal.Options.Encryption,
// pgjournal.Options.Encryption): a non-zero opts.Journal, which only Open
// reads, is ErrInvalidOptions. NewTransport raises a journal's retention to
// KeyTTL if it is shorter (a Store with a KeepAtLeast(time.Duration)
// method: the bbolt and PostgreSQL journals).
func NewTransport(store journal.Store, opts *Options) (*Transport, error) {
	if opts != nil && opts.Journal != (boltjournal.Options{}) {
		return nil, fmt.Errorf("%w: Options.Journal configures the journal Open opens; "+
			"NewTransport takes one already open (set these when opening it)", ErrInvalidOptions)
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	if j, ok := store.(*boltjournal.Journal); ok && j == nil {
		store = nil // a nil *boltjournal.Journal is no journal
	}
	if r, ok := store.(interface{ KeepAtLeast(time.Duration) }); ok {
		r.KeepAtLeast(cfg.KeyTTL) // never forget a key the server may still hold
	}
	t := &Transport{cfg: cfg, journal: store, clock: journalClock(realClock{}, store), budget: newBudget(cfg.RetryBudget)}
	if store != nil {
		t.tags = newTagger(store.IdentityKey())
	}
	if cfg.Base == nil {
		t.own = defaultBase()
	} else {
		cfg.Base = callerBase(cfg.Base) // cfg is this Transport's copy of opts
	}
	if store != nil && cfg.Observer != nil {
		// The gauge starts from what earlier runs left pending.
		n, err := store.PendingCount(context.Background())
		if err != nil {
			return nil, err
		}
		t.pending.n.Add(int64(n))
		cfg.observer.PendingChanged(n)
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper; see the Transport doc. Before
// anything is written or sent it may fail with ErrInvalidRequest,
// ErrInvalidKey, ErrBodyTooLarge, ErrKeyReuse, ErrKeyExpired, ErrNoJournal,
// an *AlreadySettledError, journal.ErrUnknownEncryptionKey or journal.ErrDecrypt (its
// operation ID names a sealed record the journal cannot open),
// journal.ErrCorrupt (its record's body does not match its hash), the
// context's error, or a write-ahead error; for the hop of a redirect, with
// a *PendingError matching ErrRedirectChanged; after that, with a *PendingError
// (the operation stays pending; also when the RetryBudget denies re-sending
// a pending operation), ErrPermanent or ErrOutcomeUnknown (unjournaled
// requests only).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.setup()
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	co, err := t.checkCall(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if req.Response != nil { // net/http follows a redirect: one idem returned?
		if m := t.markOf(req.Response); m != nil {
			if m.follows {
				return t.continueHop(req, m, co.limits)
			}
			req = m.unbound(req, t.cfg.KeyHeader, &co)
		}
	}
	body, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	if !t.journaled(&co) {
		o, err := t.unjournaled(req, body, &co)
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
	return t.roundTripJournaled(req, body.buf, &co)
}

// checkCall refuses, before the body is read, a request or per-call options
// that could never be sent.
func (t *Transport) checkCall(req *http.Request) (callOptions, error) {
	m, err := t.validRequest(req)
	if err != nil {
		return callOptions{}, err
	}
	co, err := t.callOptionsOf(req.Context())
	co.method = m
	return co, err
}

func (t *Transport) journaled(co *callOptions) bool {
	return !co.noJournal && (t.cfg.methods[co.method] || co.hasKey || co.hasOpID)
}

// unjournaled builds the operation for a request that is retried but not
// written down. A body over the cap is streamed once, without retries. A
// caller's key is checked as for a journaled request (ErrInvalidKey). A
// journaled method sent WithoutJournal gets a key kept in memory.
func (t *Transport) unjournaled(req *http.Request, b body, co *callOptions) (*op, error) {
	key, hasKey, err := callerKey(req, t.cfg.KeyHeader, co)
	if err != nil {
		return nil, err
	}
	if !hasKey && t.cfg.methods[co.method] && co.noJournal {
		if key, err = newKey(); err != nil {
			return nil, err
		}
	}
	o := &op{req: req, method: co.method, key: key, body: b.buf, limits: co.limits}
	if b.tooLarge {
		o.stream = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b.buf), b.rest), b.rest}
	}
	return o, nil
}

// setup gives a zero Transport the default Options and no journal, on its
// first call; a Transport from NewTransport is left as it is.
func (t *Transport) setup() {
	t.zero.Do(func() {
		if t.cfg != nil {
			return // built by NewTransport
		}
		cfg, err := (*Options)(nil).config()
		if err != nil { // zero Options mean the defaults, which are valid
			panic("idem: default Options: " + err.Error())
		}
		t.cfg, t.budget, t.own = cfg, newBudget(cfg.RetryBudget), defaultBase()
		if t.clock == nil { // a test may have set its own
			t.clock = newStepClock(realClock{})
		}
	})
}

// defaultBase returns the base of a Transport whose Options.Base is nil: a
// clone of http.DefaultTransport with CheckProxyConnect, so a refused CONNECT
// is typed, or http.DefaultTransport itself if the program replaced it with
// another kind of RoundTripper (idem never modifies it).
func defaultBase() http.RoundTripper {
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		return CheckProxyConnect(dt.Clone())
	}
	return http.DefaultTransport
}

// callerBase returns the base of a Transport whose Options.Base is rt: for an
// *http.Transport with a Proxy, a clone with CheckProxyConnect (see
// Options.Base); else rt itself, as one without a Proxy never sends CONNECT.
func callerBase(rt http.RoundTripper) http.RoundTripper {
	ht, ok := rt.(*http.Transport)
	if !ok || ht.Proxy == nil {
		return rt
	}
	return CheckProxyConnect(ht.Clone())
}

// CloseIdleConnections closes the idle connections of the base RoundTripper,
// if it has a CloseIdleConnections method; http.Client.CloseIdleConnections
// calls it. Connections in use are left alone.
func (t *Transport) CloseIdleConnections() {
	t.setup()
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
