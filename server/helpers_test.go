// helpers_test.go has what the middleware's tests share: a service (a payments handler
// behind the middleware, on a loopback server, over a memstore with a fake clock, its
// claims' leases on another), plain requests, a recording Observer and a Store that can
// fail.

package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/internal/lease/leasetest"
	"github.com/idem-go/idem/server/internal/servicetest"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/servertest"
)

// service is a payments handler behind the middleware, on a loopback server.
type service struct {
	t     *testing.T
	clock *servertest.Clock      // the memstore's
	lease *leasetest.ManualClock // the claims' (send times and keepers): it stands still unless a test moves it
	store *memstore.Store
	obs   *recorder
	srv   *httptest.Server
	mw    *server.Middleware

	effects atomic.Int64 // how many times the handler ran its effect
}

// newService starts a service with opts (Store, Observer and Logger filled in if nil)
// around handler; nil handler means the payments handler. The test's cleanup closes it
// and checks that no goroutine is left.
func newService(t *testing.T, opts server.Options, handler func(s *service) http.Handler) *service {
	t.Helper()
	leakcheck.Check(t)
	// The claims' clock starts at the real time: the release of a claim whose reply was lost
	// is repeated until its send time + TTL on the real clock.
	s := &service{t: t, clock: servertest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)),
		lease: leasetest.NewManualClock(time.Now()), obs: &recorder{}}
	s.store = memstore.New(&memstore.Options{Now: s.clock.Now})
	if opts.Store == nil {
		opts.Store = s.store
	}
	if opts.Observer == nil {
		opts.Observer = s.obs
	}
	mw, err := server.New(&opts)
	require.NoError(t, err)
	server.SetLeaseClock(mw, s.lease)
	s.mw = mw
	h := http.Handler(http.HandlerFunc(s.pay))
	if handler != nil {
		h = handler(s)
	}
	s.srv = httptest.NewUnstartedServer(mw.Wrap(h))
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // aborted handlers are expected here
	s.srv.Start()
	t.Cleanup(func() { shutdown(mw.Shutdown) })
	t.Cleanup(s.srv.Close)
	return s
}

// advance moves the memstore's clock and the claims' by d, and returns once the renewals
// that brought due are made.
func (s *service) advance(d time.Duration) {
	s.clock.Advance(d)
	s.lease.Advance(d)
	s.lease.Wait()
}

// sent is the answer to a request sent in the background, or the error that kept it from
// coming.
type sent struct {
	answer
	err error
}

// postAsync is post in the background.
func (s *service) postAsync(key, body string) <-chan sent {
	done := make(chan sent, 1)
	go func() {
		a, err := s.send(context.Background(), http.MethodPost, "/payments", key, body)
		done <- sent{a, err}
	}()
	return done
}

// await returns the answer done brings, failing t if it is an error or takes more than
// 10 s (a hang, not a slow machine).
func await(t *testing.T, done <-chan sent) answer {
	t.Helper()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.answer
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return answer{}
	}
}

// awaitEntered waits until entered is closed: a held handler runs. It fails t if done
// brings the request's answer first, or neither comes within 10 s.
func awaitEntered(t *testing.T, entered <-chan struct{}, done <-chan sent) {
	t.Helper()
	select {
	case <-entered:
	case r := <-done:
		t.Fatalf("the request came back (%d, %v) before its handler ran", r.status, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
	}
}

// pay is the payments handler: it runs the effect and answers 201 with the payment.
func (s *service) pay(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount   json.Number `json:"amount"`
		Currency string      `json:"currency"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	n := s.effects.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/pay_%d", n))
	w.Header().Set("Set-Cookie", "session=secret")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"pay_%d","amount":%s,"currency":%q}`+"\n", n, req.Amount, req.Currency)
}

// shutdown gives what the middleware still repeats in the background a moment to land,
// then gives it up: a test's Store may be down for good.
func shutdown(f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = f(ctx)
}

// answer is a response read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) replayed() bool { return a.header.Get("Idempotent-Replayed") == "true" }

// problem decodes a problem+json answer, failing t if it is not one.
func (a answer) problem(t *testing.T) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"), "body %s", a.body)
	var p map[string]any
	require.NoError(t, json.Unmarshal(a.body, &p))
	require.EqualValues(t, a.status, p["status"])
	require.NotEmpty(t, p["title"])
	return p
}

// problemType returns the fragment of a problem's type URI.
func (a answer) problemType(t *testing.T) string {
	t.Helper()
	typ, _ := a.problem(t)["type"].(string)
	_, frag, _ := strings.Cut(typ, "#")
	return frag
}

// post sends POST path with key (none if "") and a JSON body on a fresh connection and
// reads the answer. hdr adds header fields, as name, value pairs.
func (s *service) post(key, body string, hdr ...string) answer {
	s.t.Helper()
	a, err := s.send(context.Background(), http.MethodPost, "/payments", key, body, hdr...)
	require.NoError(s.t, err)
	return a
}

// send is post with every part chosen, returning the transport's error.
func (s *service) send(ctx context.Context, method, path, key, body string, hdr ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return do(req)
}

// do sends req on a fresh connection (so net/http never re-sends it behind the test's
// back) and reads the answer.
func do(req *http.Request) (answer, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// eventually polls cond every millisecond for up to two seconds, failing t if it never
// holds: for what another goroutine does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// recorder is servicetest's counting Observer.
type recorder = servicetest.Observer

// flakyStore is a Store that fails every call while down, and counts calls.
type flakyStore struct {
	server.Store
	down           atomic.Bool
	claims, renews atomic.Int64
}

var errDown = errors.New("store is down")

func (f *flakyStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	f.claims.Add(1)
	if f.down.Load() {
		return server.Claim{}, errDown
	}
	return f.Store.Claim(ctx, sc, token, fp, lease, ttl)
}

func (f *flakyStore) Renew(ctx context.Context, sc server.Scope, token string, lease time.Duration) error {
	f.renews.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Store.Renew(ctx, sc, token, lease)
}

func (f *flakyStore) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Complete(ctx, sc, token, resp, ttl)
}

func (f *flakyStore) Release(ctx context.Context, sc server.Scope, token string) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Release(ctx, sc, token)
}

// gate blocks handlers until opened, and counts those that entered.
type gate struct {
	entered atomic.Int64
	open    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	t.Cleanup(g.release) // never leave a handler blocked
	return g
}

func (g *gate) wait()    { g.entered.Add(1); <-g.open }
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }
