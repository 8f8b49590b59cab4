// Test helpers shared by the package's tests, by section: clocks; journals
// and Transports over them; loopback servers; TLS and proxies; round trippers
// and bodies; calls, waits and assertions; child processes. A helper used by
// one test file lives in that file.

package idem

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/childtest"
	"github.com/idem-go/idem/internal/paytest"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/journal/memjournal"
)

// Clocks: a fake clock whose timers fire when a test advances it, a clock
// that signals each sleep, a context deadline a test ends by hand.

// fakeClock advances only when the code under test sleeps. It records every
// wait so tests can check them without sleeping for real.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	// onSleep, if set, runs before the fake time advances; a test can cancel a
	// context there to model a caller that gives up mid-wait.
	onSleep func(d time.Duration)
	timers  []*fakeTimer
}

// fakeTimer is a pending After: it fires when the fake time reaches at.
type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.fire()
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// After returns a channel that receives once the fake time has advanced by d.
func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fire()
	return t.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == t })
	}
}

// Timers reports how many Afters are waiting.
func (c *fakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextTimer returns when the earliest waiting After fires, or the zero time.
func (c *fakeClock) NextTimer() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next
}

// fire sends on every timer that is due. c.mu is held.
func (c *fakeClock) fire() {
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(c.now) {
			return false
		}
		t.c <- c.now
		return true
	})
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// signalClock is a clock whose Sleep sends its duration on sleeping when a
// wait begins, then waits as its base does. A test cancels a call on that
// signal, so the cancel lands in the wait however long the attempts before
// it took.
type signalClock struct {
	clock
	sleeping chan time.Duration
}

func newSignalClock(base clock) *signalClock {
	return &signalClock{clock: base, sleeping: make(chan time.Duration, 64)}
}

func (c *signalClock) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case c.sleeping <- d:
	default: // never hold up the call under test
	}
	return c.clock.Sleep(ctx, d)
}

// manualDeadline is a context with a deadline that passes when the test calls
// pass, not when a real timer fires: Deadline reports at, and once passed,
// Done is closed and Err is context.DeadlineExceeded, as if the clock had
// reached at. It carries no values.
type manualDeadline struct {
	context.Context
	at   time.Time
	done chan struct{}
	pass func()
}

func newManualDeadline(tb testing.TB, at time.Time) *manualDeadline {
	done := make(chan struct{})
	c := &manualDeadline{Context: context.Background(), at: at, done: done,
		pass: sync.OnceFunc(func() { close(done) })}
	tb.Cleanup(c.pass) // contexts derived from it stop watching it
	return c
}

func (c *manualDeadline) Deadline() (time.Time, bool) { return c.at, true }
func (c *manualDeadline) Done() <-chan struct{}       { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// constBackoff waits d after every attempt.
func constBackoff(d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return d }
}

// Journals and the Transports over them: in memory by default, bbolt in a
// temporary directory where a test needs the file; and reading records back.

// testJournal opens a bbolt journal in a fresh temporary directory, closed
// at the end of the test. The directory is on a RAM file system when there
// is one (ramDir): the engine and its file, without the disk's fsync, which
// no test within one process can observe. Tests of the disk itself (crashes,
// a full disk, permissions) open their own path.
func testJournal(tb testing.TB) (*boltjournal.Journal, string) {
	tb.Helper()
	path := filepath.Join(ramDir(tb), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j.Close() })
	return j, path
}

// ramDir returns a fresh directory under /dev/shm when there is one, removed
// at the end of the test, and t.TempDir() otherwise.
func ramDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "idem-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// memStore is a fresh in-memory journal (journal/memjournal), closed at the
// end of the test: the Store for Transport tests that need no file, so that
// they pay no fsync.
func memStore(tb testing.TB) *memjournal.Store {
	tb.Helper()
	s := memjournal.New(nil)
	tb.Cleanup(func() { s.Close() })
	return s
}

// memTransport builds a Transport over a fresh in-memory journal with a fake
// clock: the default for Transport tests. A test that needs the bbolt file
// (its bytes, a reopen, a crash, the boltjournal.Journal's own methods) uses
// boltTransport.
func memTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	return transportWith(tb, memStore(tb), opts)
}

// boltTransport builds a Transport over a fresh bbolt journal (testJournal)
// with a fake clock, and returns the journal too.
func boltTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock, *boltjournal.Journal) {
	tb.Helper()
	j, _ := testJournal(tb)
	tr, clk := transportWith(tb, j, opts)
	return tr, clk, j
}

// testTransport is boltTransport without the journal. newScenario
// (loopback servers, below) builds on it, and its callers read the bbolt
// journal through tr.bolt(); a new test that needs no file uses memTransport.
func testTransport(tb testing.TB, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	tr, clk, _ := boltTransport(tb, opts)
	return tr, clk
}

// transportWith builds a Transport over s with a fake clock.
func transportWith(tb testing.TB, s journal.Store, opts *Options) (*Transport, *fakeClock) {
	tb.Helper()
	tr, err := NewTransport(s, opts)
	require.NoError(tb, err)
	clk := newFakeClock()
	tr.clock = clk
	return tr, clk
}

// recordLister is a Store that lists every record: the bbolt boltjournal.Journal and
// the in-memory Store both do.
type recordLister interface {
	Records() ([]*Record, error)
}

// listRecords lists every record in s, pending first.
func listRecords(s journal.Store) ([]*Record, error) { return s.(recordLister).Records() }

// onlyRecordIn returns the single record in s.
func onlyRecordIn(tb testing.TB, s journal.Store) *Record {
	tb.Helper()
	recs, err := listRecords(s)
	require.NoError(tb, err)
	require.Len(tb, recs, 1)
	return recs[0]
}

// bolt is the Transport's journal as the bbolt boltjournal.Journal it is in tests that
// built it with boltTransport, testTransport or testJournal.
func (t *Transport) bolt() *boltjournal.Journal { return t.journal.(*boltjournal.Journal) }

// transportOn builds a Transport over the bbolt journal j that sends through
// base, with a fake clock that starts at start (the zero time means now).
func transportOn(tb testing.TB, j *boltjournal.Journal, opts Options, base http.RoundTripper, start time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	return transportOver(tb, j, opts, base, start)
}

// transportOver is transportOn over any Store: memStore(tb) for a test that
// needs no file.
func transportOver(tb testing.TB, s journal.Store, opts Options, base http.RoundTripper, start time.Time) (*Transport, *fakeClock) {
	tb.Helper()
	opts.Base = base
	opts.Journal = boltjournal.Options{} // the journal's, applied when it was opened
	tr, err := NewTransport(s, &opts)
	require.NoError(tb, err)
	clk := newFakeClock()
	if !start.IsZero() {
		clk.now = start
	}
	tr.clock = clk
	return tr, clk
}

// reopen closes j and opens the journal at the same path again, as a
// restarted process would. The new journal closes with the test.
func reopen(tb testing.TB, j *boltjournal.Journal) *boltjournal.Journal {
	tb.Helper()
	require.NoError(tb, j.Close())
	j2, err := boltjournal.Open(j.Path(), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { j2.Close() })
	return j2
}

// fastJournal is testJournal without the path: a bbolt journal on a RAM
// file system when there is one, for tests about concurrency rather than
// durability.
func fastJournal(tb testing.TB) *boltjournal.Journal {
	tb.Helper()
	j, _ := testJournal(tb)
	return j
}

// onlyRecord returns the journal's single record.
func onlyRecord(tb testing.TB, tr *Transport) *Record {
	tb.Helper()
	recs, err := tr.bolt().Records()
	require.NoError(tb, err)
	require.Len(tb, recs, 1)
	return recs[0]
}

// These helpers call a journal through the journal.Store contract, as the
// Transport does, under the short names the tests used for the boltjournal.Journal's
// own methods before it moved to journal/boltjournal.

// insertRec writes rec ahead (Store.Create), its key the caller's if callerKey.
func insertRec(s journal.Store, rec *Record, callerKey bool) error {
	rec.CallerKey = callerKey
	return s.Create(context.Background(), rec)
}

// saveRec defers writing rec's new state (Store.Update, Deferred).
func saveRec(s journal.Store, rec *Record) error {
	return s.Update(context.Background(), rec, journal.Deferred)
}

// flushStore commits every deferred state change (Store.Flush).
func flushStore(s journal.Store) error { return s.Flush(context.Background()) }

// pendingAfter lists at most n pending records past seq after (Store.Pending).
func pendingAfter(s journal.Store, after uint64, n int) ([]*Record, error) {
	var recs []*Record
	for rec, err := range s.Pending(context.Background(), after) {
		if err != nil {
			return nil, err
		}
		if len(recs) == n {
			break
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// pendingCount counts the pending operations (Store.PendingCount).
func pendingCount(s journal.Store) (int, error) { return s.PendingCount(context.Background()) }

// pendingRecord is a minimal pending record with key.
func pendingRecord(key string) *Record {
	return &Record{Key: key, Method: "POST", URL: "http://127.0.0.1/payments", State: StatePending}
}

// onlyRecordOf returns the single record in j.
func onlyRecordOf(tb testing.TB, j *boltjournal.Journal) *Record {
	tb.Helper()
	return onlyRecordIn(tb, j)
}

// sealedFixture is a journal path and a server that answers 503 while
// failing is set, 201 otherwise, recording what it receives.
type sealedFixture struct {
	path    string
	srv     *recordingServer
	failing atomic.Bool
}

func newSealedFixture(t *testing.T) *sealedFixture {
	f := &sealedFixture{path: filepath.Join(t.TempDir(), "sealed.journal")}
	f.failing.Store(true)
	f.srv = newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if f.failing.Load() {
			reply(w, http.StatusServiceUnavailable)
			return
		}
		reply(w, http.StatusCreated)
	})
	return f
}

// open opens the fixture's journal with kr (nil: no encryption) and a
// Transport over it with a fake clock. The journal closes with the test, or
// earlier by the caller.
func (f *sealedFixture) open(t *testing.T, kr *boltjournal.Keyring) (*boltjournal.Journal, *Transport) {
	t.Helper()
	opts := Options{MaxAttempts: 1, Journal: boltjournal.Options{Encryption: kr}}
	j, err := boltjournal.Open(f.path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	tr, _ := transportOn(t, j, opts, f.srv.base(), time.Time{})
	return j, tr
}

// leavePending sends one payment under operation ID op; the server is
// failing, so it stays pending. It returns the body sent.
func (f *sealedFixture) leavePending(t *testing.T, tr *Transport, op string) string {
	t.Helper()
	body := paymentBody(op+"-4111111111111111", 700)
	req := newRequest(t, http.MethodPost, f.srv.URL+"/payments", body)
	req = req.WithContext(WithOperationID(context.Background(), op))
	req.Header.Set("X-Trace", "trace-"+op)
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	return body
}

// seqRec is a record with only its journal sequence number set.
func seqRec(seq uint64) *Record {
	rec := new(Record)
	journal.SetRef(rec, journal.Ref{Seq: seq})
	return rec
}

func countState(tb testing.TB, j *boltjournal.Journal, s State) int {
	tb.Helper()
	recs, err := j.Records()
	require.NoError(tb, err)
	n := 0
	for _, r := range recs {
		if r.State == s {
			n++
		}
	}
	return n
}

// Loopback servers: one that records what it was sent, a testserver for
// payments, a front that redirects.

// memScenario is newScenario over an in-memory journal: a Transport with a
// fake clock that sends to a fresh recording server (unless opts has a
// Base).
func memScenario(tb testing.TB, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	return scenarioOver(tb, memStore(tb), opts, reply)
}

// scenarioOver is newScenario over s.
func scenarioOver(tb testing.TB, s journal.Store, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	tr, clk := transportWith(tb, s, opts)
	srv := newRecordingServer(tb, clk, reply)
	if tr.cfg.Base == nil {
		tr.cfg.Base = srv.base()
	}
	return tr, clk, srv
}

// paymentRequest builds POST {base}/payments with ctx and a body that is a
// countingBody, so a test can check how often RoundTrip closed it.
func paymentRequest(tb testing.TB, ctx context.Context, base, ref string, amount int) (*http.Request, *countingBody) {
	tb.Helper()
	body := &countingBody{Reader: bytes.NewReader([]byte(paymentBody(ref, amount)))}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/payments", body)
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	return req, body
}

const payload = `{"amount": 4827, "currency": "eur", "reference": "order-4827"}`

// seenRequest is what the server received on one attempt.
type seenRequest struct {
	Method        string
	Body          []byte
	ContentLength int64
	Header        http.Header
	At            time.Time // on the Transport's clock
}

// recordingServer is an httptest server on 127.0.0.1 that answers with a
// scripted handler and records every request and every accepted connection.
type recordingServer struct {
	*httptest.Server
	clk   clock
	conns atomic.Int64

	mu   sync.Mutex
	seen []seenRequest
}

// newRecordingServer starts a server whose handler is reply(n, w, r), n being
// the 1-based number of the request. Arrivals are stamped with clk, which
// should be the Transport's clock. The test's cleanup closes the server.
func newRecordingServer(tb testing.TB, clk clock, reply func(n int, w http.ResponseWriter, r *http.Request)) *recordingServer {
	tb.Helper()
	if clk == nil {
		clk = realClock{}
	}
	s := &recordingServer{clk: clk}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{Method: r.Method, Body: body, ContentLength: r.ContentLength,
			Header: r.Header.Clone(), At: s.clk.Now()})
		n := len(s.seen)
		s.mu.Unlock()
		reply(n, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

// requests returns a copy of what the server has received so far.
func (s *recordingServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func (s *recordingServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// base is the RoundTripper attempts go through: the server's own client
// transport, whose idle connections Close shuts.
func (s *recordingServer) base() http.RoundTripper { return s.Client().Transport }

// newScenario builds a Transport with a fake clock over a fresh journal, and a
// recording server it sends its attempts to (unless opts.Base is set).
func newScenario(tb testing.TB, opts *Options, reply func(n int, w http.ResponseWriter, r *http.Request)) (*Transport, *fakeClock, *recordingServer) {
	tb.Helper()
	tr, clk := testTransport(tb, opts)
	srv := newRecordingServer(tb, clk, reply)
	if tr.cfg.Base == nil {
		tr.cfg.Base = srv.base()
	}
	return tr, clk, srv
}

// sameKey asserts every request carried one non-empty idempotency key and
// returns it.
func sameKey(tb testing.TB, reqs []seenRequest) string {
	tb.Helper()
	require.NotEmpty(tb, reqs)
	key := reqs[0].Header.Get(DefaultKeyHeader)
	require.NotEmpty(tb, key)
	for i, r := range reqs {
		require.Equal(tb, []string{key}, r.Header.Values(DefaultKeyHeader), "attempt %d", i+1)
	}
	return key
}

// reply writes status with header pairs ("Retry-After", "3") and a short body.
func reply(w http.ResponseWriter, status int, header ...string) {
	for i := 0; i+1 < len(header); i += 2 {
		w.Header().Set(header[i], header[i+1])
	}
	w.WriteHeader(status)
	io.WriteString(w, http.StatusText(status))
}

func created(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) }

// noRequests asserts that nothing was journaled and nothing reached srv.
func noRequests(tb testing.TB, tr *Transport, srv *recordingServer) {
	tb.Helper()
	recs, err := tr.bolt().Records()
	require.NoError(tb, err)
	require.Empty(tb, recs, "nothing journaled")
	require.Zero(tb, srv.count(), "nothing sent")
}

// frontHit is one request the front received.
type frontHit struct {
	Method, Path, Host string
	Keys               []string // the idempotency key header's values
	Auth               string   // the Authorization header
	Body               string
}

// redirectFront is a loopback server in front of a testserver's API that
// redirects the way API gateways and frameworks do:
//
//	POST /307/payments   307, Location: /payments (method and body kept)
//	POST /308/payments   308, Location: /payments
//	POST /301/payments   301, Location: /payments (nothing done here)
//	POST /302/payments   302, Location: /payments
//	POST /303/payments   POST /payments is run, then 303, Location:
//	                     /payments/{id} (POST/Redirect/GET: the effect exists)
//	*    /loop/N         307 to /loop/N+1, for ever
//	POST /far/payments   307 to the same API under the host name "localhost"
//
// Everything else goes to the API. It records every request it receives.
type redirectFront struct {
	*httptest.Server
	pay *testserver.Server

	mu   sync.Mutex
	hits []frontHit
}

// startFront starts a front over a fresh testserver; with h2 it speaks
// HTTP/2 over TLS (the client it returns trusts its certificate).
func startFront(tb testing.TB, h2 bool) *redirectFront {
	tb.Helper()
	f := &redirectFront{pay: startPayments(tb, nil)}
	api := f.pay.Handler()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.hits = append(f.hits, frontHit{Method: r.Method, Path: r.URL.Path, Host: r.Host,
			Keys: r.Header.Values(DefaultKeyHeader), Auth: r.Header.Get("Authorization"), Body: string(body)})
		f.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var n int
		switch {
		case r.URL.Path == "/far/payments":
			w.Header().Set("Location", strings.Replace(f.URL, "127.0.0.1", "localhost", 1)+"/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/loop/"):
			fmt.Sscanf(r.URL.Path, "/loop/%d", &n)
			w.Header().Set("Location", fmt.Sprintf("/loop/%d", n+1))
			w.WriteHeader(http.StatusTemporaryRedirect)
		case r.URL.Path == "/303/payments":
			r.URL.Path = "/payments"
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, r)
			if rec.Code != http.StatusCreated {
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
				return
			}
			w.Header().Set("Location", rec.Header().Get("Location"))
			w.WriteHeader(http.StatusSeeOther)
		case strings.HasSuffix(r.URL.Path, "/payments") && len(r.URL.Path) == len("/307/payments"):
			fmt.Sscanf(r.URL.Path, "/%d/", &n)
			w.Header().Set("Location", "/payments")
			w.WriteHeader(n)
		default:
			api.ServeHTTP(w, r)
		}
	}))
	if h2 {
		f.EnableHTTP2 = true
		f.StartTLS()
	} else {
		f.Start()
	}
	tb.Cleanup(f.Close)
	return f
}

// base is the RoundTripper idem sends through: the front's own client
// transport, which trusts its certificate and speaks HTTP/2 to it.
func (f *redirectFront) base() http.RoundTripper { return f.Client().Transport }

func (f *redirectFront) seen() []frontHit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]frontHit(nil), f.hits...)
}

// status503 refuses one request before processing, without Retry-After.
var status503 = testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable}

// freeAddr returns a loopback address nothing listens on (yet).
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := l.Addr().String()
	require.NoError(tb, l.Close())
	return addr
}

// serveConns accepts connections on a fresh 127.0.0.1 listener and runs
// handle on each until the test ends. It returns the listener's address.
func serveConns(tb testing.TB, handle func(n int, c net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(n, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TLS and proxies: a test certificate authority, TLS servers and the bases
// that trust them, a proxy that answers CONNECT with a status.

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(tb testing.TB, name string) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(tb, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a leaf certificate for 127.0.0.1 (server) or a client,
// valid until notAfter.
func (ca *testCA) issue(tb testing.TB, client bool, notAfter time.Time) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "idem test"},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(tb, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer starts an httptest TLS server on 127.0.0.1 with cfg (its
// certificate, client authentication, versions), HTTP/2 if h2.
func tlsServer(tb testing.TB, cfg *tls.Config, h2 bool, h http.HandlerFunc) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the expected handshake failures
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return srv
}

// tlsBase is an *http.Transport trusting roots, presenting certs, trying
// HTTP/2 when the server offers it.
func tlsBase(tb testing.TB, roots *x509.CertPool, certs ...tls.Certificate) *http.Transport {
	tb.Helper()
	base := &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}
	tb.Cleanup(base.CloseIdleConnections)
	return base
}

// connectProxy is a forward proxy on 127.0.0.1. A CONNECT is answered with
// status (200 opens the tunnel to the target); any other request is answered
// with status and an empty body.
func connectProxy(tb testing.TB, status int) string {
	tb.Helper()
	return serveConns(tb, func(_ int, c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method != http.MethodConnect || status != http.StatusOK {
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nProxy-Authenticate: Basic realm=\"idem\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
				status, http.StatusText(status))
			return
		}
		up, err := net.Dial("tcp", req.Host)
		if err != nil {
			fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		defer up.Close()
		fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		done := make(chan struct{})
		go func() {
			io.Copy(up, br)
			up.Close()
			close(done)
		}()
		io.Copy(c, up)
		c.Close()
		<-done
	})
}

// Round trippers and bodies: a function as a RoundTripper, one whose dial
// always fails, one that logs what went on the wire; bodies that count reads
// and closes.

// countingBody is a request body that counts its Close calls.
type countingBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// roundTripFunc is a base RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wireAttempt is what one attempt carried onto the wire.
type wireAttempt struct {
	Keys          []string // every value of the key header, whatever its spelling
	Body          []byte
	ContentLength int64
}

// wireLog is a base RoundTripper that records every attempt, then sends it
// through its own http.Transport. If intercept is set and returns a response
// or an error, that is the attempt's result and nothing is sent. It is safe
// for concurrent use.
type wireLog struct {
	next      *http.Transport
	intercept func(r *http.Request, key string) (*http.Response, error)

	mu       sync.Mutex
	attempts []wireAttempt
}

// newWireLog returns a wireLog whose idle connections close with the test.
func newWireLog(tb testing.TB) *wireLog {
	w := &wireLog{next: &http.Transport{}}
	tb.Cleanup(w.next.CloseIdleConnections)
	return w
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	keys := headerValues(r.Header, DefaultKeyHeader)
	w.mu.Lock()
	w.attempts = append(w.attempts, wireAttempt{Keys: keys, Body: body, ContentLength: r.ContentLength})
	w.mu.Unlock()
	if w.intercept != nil {
		key := ""
		if len(keys) == 1 {
			key = keys[0]
		}
		if resp, err := w.intercept(r, key); resp != nil || err != nil {
			return resp, err
		}
	}
	out := r.Clone(r.Context())
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.Body, _ = out.GetBody()
	if body == nil {
		out.Body, out.GetBody = http.NoBody, nil
	}
	return w.next.RoundTrip(out)
}

// sent returns a copy of the attempts logged so far.
func (w *wireLog) sent() []wireAttempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wireAttempt(nil), w.attempts...)
}

// requireOneKey asserts every logged attempt carried exactly one key header,
// with value key.
func (w *wireLog) requireOneKey(tb testing.TB, key string) {
	tb.Helper()
	sent := w.sent()
	require.NotEmpty(tb, sent)
	for i, a := range sent {
		require.Equal(tb, []string{key}, a.Keys, "attempt %d", i+1)
	}
}

// synthetic returns a response as a server would, for intercept.
func synthetic(r *http.Request, status int) *http.Response {
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), Body: http.NoBody, Request: r,
	}
}

// bodyTracker wraps a RoundTripper and records, for every response body it
// hands out, whether it was read to the end and whether it was closed.
type bodyTracker struct {
	base http.RoundTripper

	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	status int
	eof    atomic.Bool
	closes atomic.Int32
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return b.ReadCloser.Close()
}

func (bt *bodyTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := bt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	tb := &trackedBody{ReadCloser: resp.Body, status: resp.StatusCode}
	resp.Body = tb
	bt.mu.Lock()
	bt.bodies = append(bt.bodies, tb)
	bt.mu.Unlock()
	return resp, nil
}

func (bt *bodyTracker) tracked() []*trackedBody {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return append([]*trackedBody(nil), bt.bodies...)
}

// dialFailure is a base RoundTripper on which every dial fails: nothing
// reaches the server, so the operation stays pending.
type dialFailure struct{}

func (dialFailure) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// Calls, waits and assertions: run a call in the background, wait for an
// event instead of sleeping, poll for a condition, compare bytes.

// gate holds server handlers until the test opens it. Register
// t.Cleanup(g.open) after starting the server, so that a failing test opens
// it before the server's Close waits for its handlers.
type gate struct {
	ch      chan struct{}
	open    func()
	arrived chan struct{} // receives once per handler that reaches hold
}

func newGate() *gate {
	ch := make(chan struct{})
	return &gate{ch: ch, open: sync.OnceFunc(func() { close(ch) }), arrived: make(chan struct{}, 16)}
}

// hold is what a held handler calls: it tells the test, through arrived,
// that its request is at the server, then waits until the gate opens.
func (g *gate) hold() {
	g.arrived <- struct{}{}
	<-g.ch
}

// roundTripResult is what a RoundTrip run by roundTripAsync returned.
type roundTripResult struct {
	resp *http.Response
	err  error
}

// roundTripAsync runs tr.RoundTrip(req) in a goroutine.
func roundTripAsync(tr *Transport, req *http.Request) <-chan roundTripResult {
	done := make(chan roundTripResult, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- roundTripResult{resp, err}
	}()
	return done
}

// resumeAll runs tr.Resume and returns the outcomes it reported, each
// response body read and closed (fn runs off the test goroutine, so no
// require in it).
func resumeAll(tb testing.TB, tr *Transport) []Outcome {
	tb.Helper()
	var outs []Outcome
	require.NoError(tb, tr.Resume(context.Background(), func(o Outcome) {
		if o.Response != nil {
			io.Copy(io.Discard, o.Response.Body)
			o.Response.Body.Close()
		}
		outs = append(outs, o)
	}))
	return outs
}

// pastNextAttempt moves clk just past the record's earliest next attempt.
func pastNextAttempt(clk *fakeClock, next time.Time) {
	clk.Advance(next.Sub(clk.Now()) + time.Millisecond)
}

// bounded runs f and fails the test if f panics, or does not return within
// 10 s: bad input must give an error, never a panic or a hang.
func bounded[T any](tb testing.TB, f func() (T, error)) (T, error) {
	tb.Helper()
	type result struct {
		v     T
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", p, debug.Stack())}
			}
		}()
		v, err := f()
		done <- result{v: v, err: err}
	}()
	select {
	case r := <-done:
		if r.panic != "" {
			tb.Fatalf("panic: %s", r.panic)
		}
		return r.v, r.err
	case <-time.After(10 * time.Second):
		tb.Fatalf("no answer within 10 s")
		panic("unreachable")
	}
}

// pendingErr asserts err is a *PendingError and returns it.
func pendingErr(tb testing.TB, err error) *PendingError {
	tb.Helper()
	var perr *PendingError
	require.ErrorAs(tb, err, &perr)
	return perr
}

// sameBytes is require.Equal for bodies, printing them as text.
func sameBytes(tb testing.TB, want, got []byte, msgAndArgs ...any) {
	tb.Helper()
	if !bytes.Equal(want, got) {
		require.Equal(tb, string(want), string(got), msgAndArgs...)
	}
}

// await waits for ch to deliver or be closed, and fails the test if that
// takes more than 10 s: the bound is for a broken test, not a slow machine.
func await[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("not within 10 s: %s", what)
		panic("unreachable")
	}
}

// requireAbsent asserts that none of secrets occurs in b.
func requireAbsent(tb testing.TB, b []byte, what string, secrets ...string) {
	tb.Helper()
	for _, s := range secrets {
		require.False(tb, bytes.Contains(b, []byte(s)), "%s holds %q", what, s)
	}
}

// eventually polls cond every few milliseconds for up to limit (real time).
func eventually(tb testing.TB, limit time.Duration, cond func() bool, msg string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: "+msg, append([]any{limit}, args...)...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outcomes collects what a resumer reports.
type outcomes struct {
	mu   sync.Mutex
	list []Outcome
}

func (o *outcomes) add(out Outcome) {
	if out.Response != nil {
		out.Response.Body.Close()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, out)
}

func (o *outcomes) settled() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, out := range o.list {
		if out.Response != nil {
			n++
		}
	}
	return n
}

func (o *outcomes) all() []Outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outcome(nil), o.list...)
}

// Child processes: the test binary runs itself again (os.Args[0]) with
// -test.run=^TestHelperProcess$ and IDEM_HELPER=<mode>; TestHelperProcess then
// runs helperModes[mode] and exits with its status. To add a kind of child,
// add a mode to helperModes (or register it from its test file's init) and
// start it with helperCommand.

// helperEnv names the helper mode in a child's environment.
const helperEnv = "IDEM_HELPER"

// Environment a helper mode reads.
const (
	envJournal     = "IDEM_JOURNAL"      // journal path
	envOpenTimeout = "IDEM_OPEN_TIMEOUT" // time.ParseDuration form
	envURL         = "IDEM_URL"          // testserver base URL
	envRef         = "IDEM_REF"          // payment reference
)

// helperModes maps a mode to the child's main function, which returns the
// exit status. Modes print "name=value" lines on stdout for the parent (see
// parseReport).
var helperModes = map[string]func() int{
	"lock":       helperLock,         // journal_test.go
	"lock-ro":    helperLockReadOnly, // journal_test.go
	"s19-worker": helperS19Worker,    // resume_test.go
	"fsize-post": helperFsizePost,    // record_test.go
	"crash":      helperCrashWorker,  // transport_crash_test.go

	// transport_crash_test.go
	"torture-writer": helperTortureWriter,
}

// TestHelperProcess is the child's entry point. Without IDEM_HELPER it is an
// ordinary, empty test.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	run, ok := helperModes[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "idem test helper: unknown mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(run())
}

// helperCommand returns a command that runs mode in a child process with env
// ("NAME=value") added (childtest.Command); ctx bounds the child.
func helperCommand(ctx context.Context, mode string, env ...string) *exec.Cmd {
	return childtest.Command(ctx, "^TestHelperProcess$", append([]string{helperEnv + "=" + mode}, env...)...)
}

// runHelper runs mode to completion and returns its report and its combined
// output (childtest.Run).
func runHelper(tb testing.TB, mode string, env ...string) (map[string]string, string) {
	tb.Helper()
	return childtest.Run(tb, "^TestHelperProcess$", append([]string{helperEnv + "=" + mode}, env...)...)
}

// runAndKill runs mode, kills it with SIGKILL life after it is ready, and
// returns the operation IDs it wrote ahead (childtest.RunAndKill).
func runAndKill(tb testing.TB, run int, life time.Duration, mode string, env ...string) []string {
	tb.Helper()
	return childtest.RunAndKill(tb, run, life, "^TestHelperProcess$", append([]string{helperEnv + "=" + mode}, env...)...)
}

// The helpers this package's tests share with the root package's, from paytest.
var (
	startPayments = paytest.StartPayments
	paymentBody   = paytest.PaymentBody
	newRequest    = paytest.NewRequest
	drain         = paytest.Drain
	newKey32      = paytest.NewKey
)
