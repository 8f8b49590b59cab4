// uncertain.go holds the scenarios of uncertain outcomes, run through the middleware and
// the consumer on a Store under test: a Store call whose reply is lost after the Store
// acted (S38: LostReplies), and each way a handler can end (S40: Outcomes). A Store's own
// tests call them beside Run, e.g. TestS38LostReplies, so every Store runs them.

package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
)

// errLostReply is what a call whose reply was lost returns: the Store acted, the caller
// timed out.
var errLostReply = fmt.Errorf("servertest: reply lost: %w", context.DeadlineExceeded)

// lossy performs every call on the Store below, then loses the replies of as many calls of
// each kind as its counters say, as a connection cut after the command was written does.
type lossy struct {
	server.Store
	mu       sync.Mutex
	lose     map[string]int // by call: "claim", "complete", "release"
	last     lastClaim      // the last claim, as the Store received it
	released atomic.Int64   // Releases the Store answered
}

// lastClaim is a claim's arguments, to send it again as a late copy.
type lastClaim struct {
	sc        server.Scope
	token, fp string
}

func newLossy(s server.Store) *lossy { return &lossy{Store: s, lose: map[string]int{}} }

// set makes the next n replies to call be lost.
func (l *lossy) set(call string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose[call] = n
}

// lost reports whether this reply to call is lost, counting it.
func (l *lossy) lost(call string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose[call] > 0 {
		l.lose[call]--
		return true
	}
	return false
}

func (l *lossy) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	l.mu.Lock()
	l.last = lastClaim{sc, token, fp}
	l.mu.Unlock()
	c, err := l.Store.Claim(ctx, sc, token, fp, lease, ttl)
	if err == nil && l.lost("claim") {
		return server.Claim{}, errLostReply
	}
	return c, err
}

func (l *lossy) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	err := l.Store.Complete(ctx, sc, token, resp, ttl)
	if err == nil && l.lost("complete") {
		return errLostReply
	}
	return err
}

func (l *lossy) Release(ctx context.Context, sc server.Scope, token string) error {
	err := l.Store.Release(ctx, sc, token)
	if err == nil {
		l.released.Add(1)
	}
	if err == nil && l.lost("release") {
		return errLostReply
	}
	return err
}

// lease is the lease the scenarios give the middleware and the consumer: long enough for
// a few round trips to a real Store, short enough to wait for.
func (c *Config) lease() time.Duration { return max(4*c.RealLease, time.Second) }

// within polls f every few milliseconds for up to three leases and fails t unless it
// returns true: the scenarios' "within about a lease".
func within(t *testing.T, lease time.Duration, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * lease); !f(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within three leases (%v): %s", 3*lease, what)
		}
	}
}

// service is a handler behind the middleware on a loopback server.
type service struct {
	t   *testing.T
	url string
	mw  *server.Middleware
}

func newService(t *testing.T, o server.Options, h http.HandlerFunc) *service {
	t.Helper()
	mw, err := server.New(&o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(h))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = mw.Shutdown(ctx)
	})
	return &service{t: t, url: srv.URL, mw: mw}
}

// answer is a response read in full.
type answer struct {
	status   int
	body     string
	replayed bool
	problem  string // the problem type's fragment, for the middleware's own answers
}

// post sends POST /pay with key and a JSON body on a fresh connection; a connection the
// handler dropped (a panic) is status 0.
func (s *service) post(key string) answer {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/pay", strings.NewReader(`{"amount":1}`))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return answer{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{status: resp.StatusCode}
	}
	a := answer{status: resp.StatusCode, body: string(body), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if _, frag, ok := strings.Cut(extract(a.body, `"type":"`), "#"); ok {
		a.problem = frag
	}
	return a
}

// extract returns what follows prefix in s up to the next quote.
func extract(s, prefix string) string {
	_, rest, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// LostReplies is scenario S38: the Store performs a claim, a completion or a release, and
// its reply is lost. Through the middleware, the next try with the same key runs the
// handler exactly once within about a lease, and a repeated completion is recognised;
// through the consumer, the redelivery is processed. c.Open's Store must keep real time,
// or run on a clock the scenarios need not move (they wait for no lease to lapse).
func LostReplies(t *testing.T, c Config) {
	t.Helper()
	for _, sc := range []struct {
		name string
		fn   func(t *testing.T, c *Config)
	}{
		{"ClaimReplyLostOnce", s38ClaimLostOnce},
		{"ClaimReplyLost", s38ClaimLost},
		{"ClaimArrivesAfterItsRelease", s38ClaimAfterRelease},
		{"CompleteReplyLost", s38CompleteLost},
		{"ReleaseReplyLost", s38ReleaseLost},
		{"ConsumerClaimReplyLost", s38ConsumerClaimLost},
		{"ConsumerCompleteReplyLost", s38ConsumerCompleteLost},
		{"ConsumerReleaseReplyLost", s38ConsumerReleaseLost},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.fn(t, &c)
		})
	}
}

// paying is a handler that makes its effect (counted) and answers 201.
func paying(effects *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := effects.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_%d"}`, n)
	}
}

// One lost claim reply: the middleware's repeat, with the same token, finds its own claim.
func s38ClaimLostOnce(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	var effects atomic.Int64
	s := newService(t, server.Options{Store: l, Lease: c.lease()}, paying(&effects))
	l.set("claim", 1)
	if got := s.post("k"); got.status != http.StatusCreated {
		t.Fatalf("first try = %+v, want 201: the repeated claim is the middleware's own", got)
	}
	if got := s.post("k"); !got.replayed || effects.Load() != 1 {
		t.Errorf("retry = %+v after %d effects, want a replay of one", got, effects.Load())
	}
}

// Every claim reply of one request lost: 503; the claim, which landed, is released once the
// Store answers, and the next try runs the handler once.
func s38ClaimLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	var effects atomic.Int64
	s := newService(t, server.Options{Store: l, Lease: c.lease()}, paying(&effects))
	l.set("claim", 3)
	l.set("release", 2) // and the first releases of the orphaned claim too
	if got := s.post("k"); got.status != http.StatusServiceUnavailable || effects.Load() != 0 {
		t.Fatalf("first try = %+v after %d effects, want 503 and none", got, effects.Load())
	}
	var got answer
	within(t, c.lease(), "the key runs again", func() bool {
		got = s.post("k")
		return got.status != http.StatusConflict
	})
	if got.status != http.StatusCreated || got.replayed {
		t.Fatalf("try after the Store answered = %+v, want the handler's 201", got)
	}
	if again := s.post("k"); !again.replayed || effects.Load() != 1 {
		t.Errorf("retry = %+v after %d effects, want a replay of one", again, effects.Load())
	}
}

// A claim delayed in the network arrives after the release that cleaned it up (the
// request had got 503): the Store refuses it, and the key is not left held by a record no
// handler runs; the next try runs the handler once.
func s38ClaimAfterRelease(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	var effects atomic.Int64
	s := newService(t, server.Options{Store: l, Lease: c.lease()}, paying(&effects))
	l.set("claim", 3)
	if got := s.post("k"); got.status != http.StatusServiceUnavailable {
		t.Fatalf("first try = %+v, want 503", got)
	}
	within(t, c.lease(), "the clean-up release", func() bool { return l.released.Load() > 0 })
	l.mu.Lock()
	late := l.last
	l.mu.Unlock()
	// The late claim, as the Store receives it: the request's Scope, token and fingerprint.
	if _, err := l.Store.Claim(context.Background(), late.sc, late.token, late.fp, c.lease(), time.Hour); !errors.Is(err, server.ErrLeaseLost) {
		t.Fatalf("the late claim = %v, want ErrLeaseLost: its token was released", err)
	}
	wantRunsOnce(t, s, c.lease(), &effects)
}

// The completion landed, its reply was lost: the repeat finds it made, and retries replay.
func s38CompleteLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	var effects atomic.Int64
	s := newService(t, server.Options{Store: l, Lease: c.lease()}, paying(&effects))
	l.set("complete", 1)
	first := s.post("k")
	if first.status != http.StatusCreated {
		t.Fatalf("first try = %+v", first)
	}
	var got answer
	within(t, c.lease(), "the replay", func() bool { got = s.post("k"); return got.replayed })
	if got.body != first.body || effects.Load() != 1 {
		t.Errorf("replay %q after %d effects, want %q after one", got.body, effects.Load(), first.body)
	}
}

// A release (the handler said nothing happened) landed, its reply was lost: the key is
// free, and the next try runs the handler again rather than getting 409 until it expires.
func s38ReleaseLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	var runs atomic.Int64
	s := newService(t, server.Options{Store: l, Lease: c.lease()}, func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			server.DiscardResponse(r.Context())
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	l.set("release", 1)
	if got := s.post("k"); got.status != http.StatusServiceUnavailable {
		t.Fatalf("first try = %+v", got)
	}
	var got answer
	within(t, c.lease(), "the handler runs again", func() bool { got = s.post("k"); return got.status != http.StatusConflict })
	if got.status != http.StatusCreated || runs.Load() != 2 {
		t.Errorf("next try = %+v after %d runs, want the handler's 201 on the second", got, runs.Load())
	}
}

// newProcessor returns a Processor on store for the scenarios.
func newProcessor(t *testing.T, store server.Store, lease time.Duration) *consumer.Processor {
	t.Helper()
	return startProcessor(t, &consumer.Options{Store: store, Lease: lease, Group: t.Name()})
}

// redeliver is redeliverID for the message "m".
func redeliver(t *testing.T, p *consumer.Processor, lease time.Duration, handle func(context.Context) error) consumer.Result {
	t.Helper()
	res, _ := redeliverID(t, p, lease, "m", handle)
	return res
}

// The consumer's claim landed, its replies were lost: Process fails (no ack), and the
// redelivery, once the claim is released, runs the handler once.
func s38ConsumerClaimLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	p := newProcessor(t, l, c.lease())
	var effects atomic.Int64
	handle := func(context.Context) error { effects.Add(1); return nil }
	l.set("claim", 3)
	if _, err := p.Process(context.Background(), "q", "m", handle); err == nil {
		t.Fatal("Process with every claim reply lost succeeded")
	}
	if res := redeliver(t, p, c.lease(), handle); res != consumer.Processed || effects.Load() != 1 {
		t.Errorf("redelivery = %v after %d effects, want processed once", res, effects.Load())
	}
}

// The done-mark landed, its reply was lost: Process fails (no ack); the redelivery finds
// the message done.
func s38ConsumerCompleteLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	p := newProcessor(t, l, c.lease())
	var effects atomic.Int64
	handle := func(context.Context) error { effects.Add(1); return nil }
	l.set("complete", 1)
	if _, err := p.Process(context.Background(), "q", "m", handle); err == nil {
		t.Fatal("Process whose done-mark reply was lost succeeded")
	}
	if res := redeliver(t, p, c.lease(), handle); res != consumer.Duplicate || effects.Load() != 1 {
		t.Errorf("redelivery = %v after %d effects, want a duplicate of one", res, effects.Load())
	}
}

// The handler failed and the release landed, its reply lost: the redelivery runs it again.
func s38ConsumerReleaseLost(t *testing.T, c *Config) {
	l := newLossy(c.Open(t))
	p := newProcessor(t, l, c.lease())
	var runs atomic.Int64
	handle := func(context.Context) error {
		if runs.Add(1) == 1 {
			return errors.New("payment provider down")
		}
		return nil
	}
	l.set("release", 1)
	if res, _ := p.Process(context.Background(), "q", "m", handle); res != consumer.Failed {
		t.Fatalf("first delivery = %v, want failed", res)
	}
	if res := redeliver(t, p, c.lease(), handle); res != consumer.Processed || runs.Load() != 2 {
		t.Errorf("redelivery = %v after %d runs, want processed on the second", res, runs.Load())
	}
}
