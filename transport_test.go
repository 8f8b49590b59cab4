// Tests for Transport (transport.go): its RoundTripper contract, the zero
// Transport, what RoundTrip makes of each kind of input (S23 for many at
// once), a fuzzed server's answers, the base it sends through (S43 proxy
// CONNECT), and benchmarks of a whole round trip. Crash points:
// transport_crash_test.go.

package idem

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/idem-go/idem/internal/leakcheck"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/testserver"
)

func TestNilHeaderMapJournaled(t *testing.T) {
	t.Parallel()
	tr, _, srv := newScenario(t, nil, created)
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r7", 700))
	req.Header = nil
	var resp *http.Response
	var err error
	require.NotPanics(t, func() { resp, err = tr.RoundTrip(req) })
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, onlyRecord(t, tr).Key, sameKey(t, srv.requests()))
	require.Nil(t, req.Header, "the caller's request is not modified")
}

func TestBrokenBaseNoPanic(t *testing.T) {
	t.Parallel()
	t.Run("nil response and nil error", func(t *testing.T) {
		j, _ := testJournal(t)
		base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
		tr, _ := transportOn(t, j, Options{MaxAttempts: 2}, base, time.Time{})
		var resp *http.Response
		var err error
		require.NotPanics(t, func() {
			resp, err = tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
		})
		require.Nil(t, resp)
		require.Error(t, err)
		require.Equal(t, 2, pendingErr(t, err).Attempts)
	})
	t.Run("response with nil Body", func(t *testing.T) {
		j, _ := testJournal(t)
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp := synthetic(r, http.StatusServiceUnavailable) // discarded: drained and closed
			if n.Add(1) > 1 {
				resp = synthetic(r, http.StatusCreated)
			}
			resp.Body = nil
			return resp, nil
		})
		tr, _ := transportOn(t, j, Options{}, base, time.Time{})
		require.NotPanics(t, func() {
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1:1/payments", paymentBody("order-r11", 1100)))
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Empty(t, drain(t, resp))
		})
		require.EqualValues(t, 2, n.Load())
		require.Equal(t, StateSettled, onlyRecordOf(t, j).State)
	})
}

func TestCanceledContextJournalsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr, _, srv := newScenario(t, nil, created)
	req, body := paymentRequest(t, ctx, srv.URL, "order-r15", 1500)
	resp, err := tr.RoundTrip(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, new(*PendingError)), "nothing to resume")
	noRequests(t, tr, srv)
	require.EqualValues(t, 1, body.closes.Load())
}

func TestEmptyMethodIsGET(t *testing.T) {
	// "" means GET (net/http): idempotent, so not journaled, and retried
	// even when the connection fails after the request was written.
	tr, clk, srv := newScenario(t, nil, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1: // on a fresh connection, so net/http does not retry it itself
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case 2:
			reply(w, http.StatusServiceUnavailable)
		default:
			reply(w, http.StatusOK)
		}
	})
	req := newRequest(t, http.MethodGet, srv.URL+"/payments/p1", "")
	req.Method = ""
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, clk.Sleeps(), 2)

	recs, err := tr.bolt().Records()
	require.NoError(t, err)
	require.Empty(t, recs, "a GET is not journaled")
	seen := srv.requests()
	require.Len(t, seen, 3)
	for i, r := range seen {
		require.Equal(t, http.MethodGet, r.Method, "attempt %d", i+1)
		require.Empty(t, r.Header.Values(DefaultKeyHeader), "attempt %d", i+1)
	}
}

func TestS23_ConcurrentThousandOps(t *testing.T) {
	t.Parallel()
	const (
		ops         = 1000
		workers     = 50
		forced      = 3  // synthetic 503s every operation meets first
		maxAttempts = 14 // leaves 11 attempts for the server's random faults
	)
	// About one request in five faults at random: 503 and 429 (Retry-After: 1),
	// lost responses (committed, then reset) and dropped connections.
	plan, err := testserver.ParsePlan(23, "503=0.08,429=0.04,lost=0.05,drop=0.03")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{Plan: plan})

	// Every operation's first attempts get 503 before reaching the server, so
	// each one needs more than a few attempts of its own: a budget shared
	// between requests, or state leaking from one to another, would show.
	wire := newWireLog(t)
	var attempts sync.Map // key -> *atomic.Int32
	wire.intercept = func(r *http.Request, key string) (*http.Response, error) {
		n, _ := attempts.LoadOrStore(key, new(atomic.Int32))
		if n.(*atomic.Int32).Add(1) <= forced {
			return synthetic(r, http.StatusServiceUnavailable), nil
		}
		return nil, nil
	}
	j := fastJournal(t)
	// The retry budget is shared between requests by design, and three
	// forced 503s per operation would empty it: S23 is about each request's
	// own attempts, so it is off here (TestRetryBudgetConcurrentNothingLost
	// runs a concurrent faulty load with it on).
	tr, _ := transportOn(t, j, Options{MaxAttempts: maxAttempts, RetryBudget: RetryBudget{Disabled: true}}, wire, time.Time{})

	refs := make([]string, ops)
	for i := range refs {
		refs[i] = fmt.Sprintf("order-s23-%04d", i)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				req, body := paymentRequest(t, context.Background(), srv.URL, refs[i], 1+i)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("%s: %v", refs[i], err)
					continue
				}
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("%s: status %d", refs[i], resp.StatusCode)
				}
				resp.Body.Close()
				if n := body.closes.Load(); n != 1 {
					t.Errorf("%s: body closed %d times", refs[i], n)
				}
			}
		})
	}
	for i := range ops {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.False(t, t.Failed())

	l := srv.Ledger()
	require.NoError(t, l.Check(refs))
	require.Equal(t, ops, l.Payments())
	require.Positive(t, l.Replays, "lost responses were replayed")

	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, ops)
	byRef := make(map[string]bool)
	for _, rec := range recs {
		require.Equal(t, StateSettled, rec.State, rec.Key)
		require.Equal(t, http.StatusCreated, rec.Status, rec.Key)
		n, ok := attempts.Load(rec.Key)
		require.True(t, ok, rec.Key)
		require.EqualValues(t, rec.Attempts, n.(*atomic.Int32).Load(), "attempts of %s", rec.Key)
		require.Greater(t, rec.Attempts, forced)
		require.LessOrEqual(t, rec.Attempts, maxAttempts)
		byRef[rec.URL+" "+rec.BodySHA256] = true
	}
	require.Len(t, byRef, ops, "one record per operation")

	// Every attempt carried one key, and each key always the same body.
	bodies := make(map[string]string)
	for _, a := range wire.sent() {
		require.Len(t, a.Keys, 1)
		if prev, ok := bodies[a.Keys[0]]; ok {
			require.Equal(t, prev, string(a.Body))
		}
		bodies[a.Keys[0]] = string(a.Body)
	}
	require.Len(t, bodies, ops)
}

// Concurrent first calls on a zero Transport set it up once: a GET whose
// first attempt gets 503 is retried to its 200, a POST (which needs a
// journal) is refused with ErrNoJournal and never sent; Resume says there is
// no journal. Run with -race.
func TestZeroTransportConcurrentFirstCalls(t *testing.T) {
	t.Parallel()
	var gets, posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else if gets.Add(1); strings.HasPrefix(r.Header.Get(AttemptHeader), "attempt=1;") {
			reply(w, http.StatusServiceUnavailable) // each GET's first attempt
			return
		}
		reply(w, http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	tr := &Transport{clock: newFakeClock()} // zero but for the clock: no real waits
	const n = 16
	var wg sync.WaitGroup
	statuses := make([]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			method := http.MethodGet
			if i%2 == 1 {
				method = http.MethodPost
			}
			<-start
			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, "x"))
			errs[i] = err
			if resp != nil {
				statuses[i] = resp.StatusCode
				drain(t, resp)
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if i%2 == 1 {
			require.ErrorIs(t, errs[i], ErrNoJournal, "call %d", i)
			continue
		}
		require.NoError(t, errs[i], "call %d", i)
		require.Equal(t, http.StatusOK, statuses[i], "call %d: retried to its 200", i)
	}
	require.Zero(t, posts.Load(), "nothing that needs a journal was sent")
	require.EqualValues(t, n, gets.Load(), "each GET took two attempts")
	require.ErrorIs(t, tr.Resume(context.Background(), nil), ErrNoJournal)
	require.Equal(t, DefaultMaxAttempts, tr.cfg.MaxAttempts, "the default Options")
}

// The literal forms from net/http's habits work: a zero Transport value and
// one in an http.Client.
func TestZeroTransportInHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	resp, err := (&http.Client{Transport: &Transport{}}).Get(srv.URL)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var tr Transport
	resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)
	_, err = (&http.Client{Transport: &tr}).Post(srv.URL, "application/json", nil)
	require.ErrorIs(t, err, ErrNoJournal)
}

// badCall is one row: a request and what RoundTrip must make of it.
type badCall struct {
	name  string
	build func(t *testing.T, base string) *http.Request // base: the server's URL
	opts  Options

	// A refused row names its error: errors.Is target and a substring naming
	// the field or input. Nothing is sent, nothing written.
	wantIs   error
	wantText string

	// An accepted row (wantIs nil) is sent once and settles, with one key.
	// check looks further at what the server got and the journal kept;
	// notInFile lists strings the journal file's bytes must not hold.
	check     func(t *testing.T, got seenRequest, rec *Record)
	notInFile []string

	// rtOnly, if set, says why the row does not run through the http.Client.
	rtOnly string
}

// errHalfway is the failure of a body that breaks half-way through.
var errHalfway = errors.New("disk on fire half-way through the body")

const userinfoSecret = "s3cr3t-pass"

func badCalls() []badCall {
	post := func(body io.Reader) func(*testing.T, string) *http.Request {
		return func(t *testing.T, base string) *http.Request {
			req, err := http.NewRequest(http.MethodPost, base+"/payments", body)
			require.NoError(t, err)
			return req
		}
	}
	payment := func() io.Reader { return strings.NewReader(paymentBody("order-bad", 5)) }
	withCtx := func(ctx context.Context) func(*testing.T, string) *http.Request {
		return func(t *testing.T, base string) *http.Request {
			return post(payment())(t, base).WithContext(ctx)
		}
	}
	withKey := func(k string) func(*testing.T, string) *http.Request {
		return withCtx(WithKey(context.Background(), k))
	}
	withHeader := func(method string, h http.Header) func(*testing.T, string) *http.Request {
		return func(t *testing.T, base string) *http.Request {
			req, err := http.NewRequest(method, base+"/payments", payment())
			require.NoError(t, err)
			for k, v := range h {
				req.Header[k] = v // as given: not canonicalized
			}
			return req
		}
	}
	// byHand builds a request as a caller may without http.NewRequest, with
	// whatever URL it likes; host "" means the server's.
	byHand := func(method string, u func(host string) *url.URL) func(*testing.T, string) *http.Request {
		return func(t *testing.T, base string) *http.Request {
			b, err := url.Parse(base)
			require.NoError(t, err)
			return &http.Request{Method: method, URL: u(b.Host), Header: make(http.Header),
				Body: io.NopCloser(payment())}
		}
	}
	key := func(n int) string { return strings.Repeat("k", n) }
	emptyBody := func(t *testing.T, got seenRequest, rec *Record) {
		require.Empty(t, got.Body)
		require.Zero(t, got.ContentLength)
		require.Empty(t, rec.Body)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + userinfoSecret))

	return []badCall{
		// Bodies.
		{name: "nil body", build: post(nil), check: emptyBody},
		{name: "http.NoBody", build: func(t *testing.T, base string) *http.Request {
			req := post(nil)(t, base)
			req.Body = http.NoBody
			return req
		}, check: emptyBody},
		{name: "body errors half-way", build: post(io.MultiReader(strings.NewReader(`{"amount":`), iotest.ErrReader(errHalfway))),
			wantIs: errHalfway, wantText: "reading request body"},
		{name: "body over the cap", build: post(payment()), opts: Options{MaxBodyBytes: 16},
			wantIs: ErrBodyTooLarge, wantText: "more than 16 bytes"},

		// URLs.
		{name: "nil URL", build: byHand(http.MethodPost, func(string) *url.URL { return nil }),
			wantIs: ErrInvalidRequest, wantText: "nil URL",
			rtOnly: "http.Client refuses a nil URL itself, before any RoundTripper"},
		{name: "empty URL", build: byHand(http.MethodPost, func(string) *url.URL { return &url.URL{} }),
			wantIs: ErrInvalidRequest, wantText: `unsupported scheme ""`},
		{name: "unsupported scheme", build: byHand(http.MethodPost, func(h string) *url.URL {
			return &url.URL{Scheme: "ftp", Host: h, Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: `unsupported scheme "ftp"`},
		{name: "no host", build: byHand(http.MethodPost, func(string) *url.URL {
			return &url.URL{Scheme: "http", Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: "no host in URL"},
		{name: "space in host", build: byHand(http.MethodPost, func(h string) *url.URL {
			return &url.URL{Scheme: "http", Host: h + " ", Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: "invalid URL"},
		{name: "control character in host", build: byHand(http.MethodPost, func(h string) *url.URL {
			return &url.URL{Scheme: "http", Host: "127.0.0.1\n" + h[strings.LastIndex(h, ":"):], Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: "invalid URL"},
		{name: "# in the raw query", build: byHand(http.MethodPost, func(h string) *url.URL {
			return &url.URL{Scheme: "http", Host: h, Path: "/payments", RawQuery: "a=1#token=2"}
		}), wantIs: ErrInvalidRequest, wantText: `"#" in the raw query`},
		{name: "port not a number", build: byHand(http.MethodPost, func(string) *url.URL {
			return &url.URL{Scheme: "http", Host: "127.0.0.1:https", Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: "invalid port"},
		{name: "space and control character in path are escaped and sent",
			build: byHand(http.MethodPost, func(h string) *url.URL {
				return &url.URL{Scheme: "http", Host: h, Path: "/pay ments\n"}
			}),
			check: func(t *testing.T, _ seenRequest, rec *Record) {
				require.True(t, strings.HasSuffix(rec.URL, "/pay%20ments%0A"), rec.URL)
			}},
		{name: "userinfo is sent, never journaled", build: func(t *testing.T, base string) *http.Request {
			return post(payment())(t, strings.Replace(base, "://", "://user:"+userinfoSecret+"@", 1))
		}, check: func(t *testing.T, _ seenRequest, rec *Record) {
			require.NotContains(t, rec.URL, "user")
		}, notInFile: []string{userinfoSecret, basic}},

		// Methods and headers.
		{name: "nil request", build: func(*testing.T, string) *http.Request { return nil },
			wantIs: ErrInvalidRequest, wantText: "nil request",
			rtOnly: "http.Client.Do(nil) is net/http's own panic"},
		{name: "invalid method", build: byHand("PO ST", func(h string) *url.URL {
			return &url.URL{Scheme: "http", Host: h, Path: "/payments"}
		}), wantIs: ErrInvalidRequest, wantText: `invalid method "PO ST"`},
		{name: "CR LF in a header value", build: withHeader(http.MethodPost, http.Header{"X-Note": {"a\r\nX-Injected: 1"}}),
			wantIs: ErrInvalidRequest, wantText: `invalid value for header "X-Note"`},

		// Per-call options: zero or negative is an error here, unlike in Options.
		{name: "WithMaxAttempts(0)", build: withCtx(WithMaxAttempts(context.Background(), 0)),
			wantIs: ErrInvalidRequest, wantText: "WithMaxAttempts(0)"},
		{name: "WithMaxAttempts(-1)", build: withCtx(WithMaxAttempts(context.Background(), -1)),
			wantIs: ErrInvalidRequest, wantText: "WithMaxAttempts(-1)"},
		{name: "WithAttemptTimeout(0)", build: withCtx(WithAttemptTimeout(context.Background(), 0)),
			wantIs: ErrInvalidRequest, wantText: "WithAttemptTimeout(0s)"},
		{name: "WithAttemptTimeout(-1s)", build: withCtx(WithAttemptTimeout(context.Background(), -time.Second)),
			wantIs: ErrInvalidRequest, wantText: "WithAttemptTimeout(-1s)"},
		{name: "WithoutJournal with WithOperationID", build: withCtx(WithoutJournal(WithOperationID(context.Background(), "op-1"))),
			wantIs: ErrInvalidRequest, wantText: "WithoutJournal with WithOperationID"},

		// Caller keys, from the context and from the header.
		{name: "WithKey empty", build: withKey(""), wantIs: ErrInvalidKey, wantText: "empty idempotency key"},
		{name: "header key empty", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {""}}),
			wantIs: ErrInvalidKey, wantText: "empty idempotency key"},
		{name: "WithKey 256 characters", build: withKey(key(256)), wantIs: ErrInvalidKey, wantText: "256 bytes, more than 255"},
		{name: "header key 256 characters", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {key(256)}}),
			wantIs: ErrInvalidKey, wantText: "256 bytes, more than 255"},
		{name: "WithKey 255 characters", build: withKey(key(255)), check: func(t *testing.T, got seenRequest, rec *Record) {
			require.Equal(t, key(255), rec.Key)
		}},
		{name: "header key 255 characters", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {key(255)}}),
			check: func(t *testing.T, got seenRequest, rec *Record) { require.Equal(t, key(255), rec.Key) }},
		{name: "WithKey with CR", build: withKey("abc\rdef"), wantIs: ErrInvalidKey, wantText: "byte 0xd at 3"},
		{name: "WithKey with LF", build: withKey("abc\ndef"), wantIs: ErrInvalidKey, wantText: "byte 0xa at 3"},
		{name: "header key with CR", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {"abc\r"}}),
			wantIs: ErrInvalidKey, wantText: "byte 0xd at 3"},
		{name: "header key with LF", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {"abc\nX-Injected: 1"}}),
			wantIs: ErrInvalidKey, wantText: "byte 0xa at 3"},
		{name: "WithKey non-ASCII", build: withKey("ключ"), wantIs: ErrInvalidKey, wantText: "byte 0xd0 at 0"},
		{name: "header key non-ASCII", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {"key-ключ"}}),
			wantIs: ErrInvalidKey, wantText: "byte 0xd0 at 4"},
		{name: "unjournaled PUT, header key with LF", build: withHeader(http.MethodPut, http.Header{"Idempotency-Key": {"abc\n"}}),
			wantIs: ErrInvalidKey, wantText: "byte 0xa at 3"},
		{name: "two key values", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {"k-1", "k-2"}}),
			wantIs: ErrInvalidKey, wantText: "2 Idempotency-Key headers"},
		{name: "one key value twice", build: withHeader(http.MethodPost, http.Header{"Idempotency-Key": {"k-1", "k-1"}}),
			wantIs: ErrInvalidKey, wantText: "2 Idempotency-Key headers"},
		{name: "two key headers differing in case", build: withHeader(http.MethodPost,
			http.Header{"Idempotency-Key": {"k-1"}, "idempotency-key": {"k-2"}}),
			wantIs: ErrInvalidKey, wantText: "2 Idempotency-Key headers"},
		{name: "operation ID empty", build: withCtx(WithOperationID(context.Background(), "")),
			wantIs: ErrInvalidKey, wantText: "empty operation ID"},
		{name: "operation ID with LF", build: withCtx(WithOperationID(context.Background(), "order-1\n")),
			wantIs: ErrInvalidKey, wantText: "operation ID has byte 0xa at 7"},
	}
}

func TestBadInputRequests(t *testing.T) {
	t.Parallel()
	for _, tc := range badCalls() {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("RoundTrip", func(t *testing.T) { runBadCall(t, tc, false) })
			t.Run("http.Client", func(t *testing.T) {
				if tc.rtOnly != "" {
					t.Skip(tc.rtOnly)
				}
				runBadCall(t, tc, true)
			})
		})
	}
}

// runBadCall sends tc's request through a fresh Client to a loopback server
// that answers 201, then checks the error, the server and the journal.
func runBadCall(t *testing.T, tc badCall, viaClient bool) {
	srv := newRecordingServer(t, nil, func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	path := filepath.Join(t.TempDir(), "idem.journal")
	opts := tc.opts
	opts.Base = srv.base()
	c, err := Open(path, &opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	req := tc.build(t, srv.URL)
	var body *countingBody
	if req != nil && req.Body != nil && req.Body != http.NoBody {
		body = &countingBody{Reader: req.Body}
		req.Body = body
	}
	resp, err := bounded(t, func() (*http.Response, error) {
		if viaClient {
			return c.HTTPClient().Do(req)
		}
		return c.Transport().RoundTrip(req)
	})
	if body != nil {
		require.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed exactly once")
	}
	recs, rerr := c.Journal().Records()
	require.NoError(t, rerr)

	if tc.wantIs != nil {
		require.Nil(t, resp)
		require.ErrorIs(t, err, tc.wantIs)
		require.ErrorContains(t, err, tc.wantText)
		if viaClient {
			var uerr *url.Error
			require.ErrorAs(t, err, &uerr, "http.Client wraps it")
		}
		require.Zero(t, srv.count(), "nothing sent")
		require.Empty(t, recs, "nothing written")
		return
	}
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	seen := srv.requests()
	require.Len(t, seen, 1, "sent exactly once")
	key := sameKey(t, seen)
	require.Len(t, recs, 1, "one record")
	rec := recs[0]
	require.Equal(t, key, rec.Key, "the journaled key went on the wire")
	require.Equal(t, StateSettled, rec.State)
	require.Equal(t, http.StatusCreated, rec.Status)
	if tc.check != nil {
		tc.check(t, seen[0], rec)
	}
	require.NoError(t, c.Close()) // everything on disk before the file is read
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, s := range tc.notInFile {
		require.NotContains(t, string(raw), s, "the journal file holds it")
	}
}

// rawServer accepts connections on 127.0.0.1:0; for each it reads one request (all of
// its body when readBody), writes the next scripted answer verbatim and closes, with an
// RST instead of a FIN when reset. The first request gets first, later ones rest.
type rawServer struct {
	ln          net.Listener
	first, rest []byte
	readBody    bool
	reset       bool
	wg          sync.WaitGroup

	mu   sync.Mutex
	seen []wireAttempt // Body is nil when the body was not read
}

func startRawServer(tb testing.TB, first, rest []byte, readBody, reset bool) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &rawServer{ln: ln, first: first, rest: rest, readBody: readBody, reset: reset}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	return s
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return // the client gave up before a whole request: nothing to answer
	}
	a := wireAttempt{Keys: headerValues(req.Header, DefaultKeyHeader), ContentLength: req.ContentLength}
	if s.readBody {
		if a.Body, err = io.ReadAll(req.Body); err != nil {
			return
		}
	}
	s.mu.Lock()
	s.seen = append(s.seen, a)
	answer := s.rest
	if len(s.seen) == 1 {
		answer = s.first
	}
	s.mu.Unlock()
	c.Write(answer)
	if tc, ok := c.(*net.TCPConn); ok && s.reset {
		tc.SetLinger(0)
	}
}

// close stops accepting and waits for every connection to be closed.
func (s *rawServer) close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *rawServer) attempts() []wireAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireAttempt(nil), s.seen...)
}

// fuzzMaxAttempts keeps each input to a few milliseconds.
const fuzzMaxAttempts = 3

func FuzzTransportResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"),
		[]byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"), uint8(1))
	f.Fuzz(func(t *testing.T, first, rest []byte, mode uint8) {
		before := runtime.NumGoroutine()
		srv := startRawServer(t, first, rest, mode&1 != 0, mode&2 != 0)
		base := &http.Transport{}
		j := memStore(t)
		tr, clk := transportOver(t, j, Options{MaxAttempts: fuzzMaxAttempts, AttemptTimeout: time.Second}, base, time.Time{})
		start := clk.Now()
		ctx := context.Background()
		if mode&4 != 0 {
			ctx = WithOperationID(ctx, "order-4827/charge")
		}
		var deadline time.Time
		if mode&8 != 0 { // a deadline the fake clock can pass: Retry-After beyond it gives up
			var cancel context.CancelFunc
			deadline = start.Add(20 * time.Second)
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		body := []byte(paymentBody("order-4827", 1250))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.ln.Addr().String()+"/payments", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}

		resp, err := tr.RoundTrip(req)
		if (resp == nil) == (err == nil) {
			t.Fatalf("RoundTrip returned response %v and error %v", resp != nil, err)
		}
		if resp != nil {
			io.CopyN(io.Discard, resp.Body, 1<<16)
			resp.Body.Close()
			if DefaultClassifier(Attempt{Response: resp, Keyed: true}) != ClassFinal {
				t.Fatalf("status %d returned to the caller, yet the classifier says retry", resp.StatusCode)
			}
		}
		base.CloseIdleConnections()
		srv.close()

		// Nothing lost: the one operation is settled with the status returned, or
		// pending (or failed, if no request ever reached the server).
		recs, rerr := j.Records()
		if rerr != nil || len(recs) != 1 {
			t.Fatalf("journal: %d records, %v", len(recs), rerr)
		}
		rec, seen := recs[0], srv.attempts()
		var perr *PendingError
		switch {
		case resp != nil:
			if rec.State != StateSettled || rec.Status != resp.StatusCode {
				t.Fatalf("response %d returned, record %v with status %d", resp.StatusCode, rec.State, rec.Status)
			}
		case errors.As(err, &perr):
			if rec.State != StatePending || perr.Key != rec.Key || !bytes.Equal(rec.Body, body) {
				t.Fatalf("%v, but record %v key %q body %q", err, rec.State, rec.Key, rec.Body)
			}
		case errors.Is(err, ErrPermanent):
			if rec.State != StateFailed || len(seen) > 0 {
				t.Fatalf("%v after %d requests reached the server; record %v", err, len(seen), rec.State)
			}
		default:
			t.Fatalf("unexpected error %v (record %v)", err, rec.State)
		}
		t.Logf("record %v, status %d, %d attempts, %d requests seen, waits %v, error %v",
			rec.State, rec.Status, rec.Attempts, len(seen), clk.Sleeps(), err)
		if rec.Attempts < 1 || rec.Attempts > fuzzMaxAttempts {
			t.Fatalf("record counts %d attempts, limit %d", rec.Attempts, fuzzMaxAttempts)
		}
		if mode&4 != 0 && rec.OperationID != "order-4827/charge" {
			t.Fatalf("record operation ID %q", rec.OperationID)
		}

		// The same key and byte-identical body on every attempt, net/http's own
		// re-sends on a dead keep-alive connection included.
		if len(seen) > 2*fuzzMaxAttempts {
			t.Fatalf("%d requests reached the server for %d attempts", len(seen), fuzzMaxAttempts)
		}
		for i, a := range seen {
			if len(a.Keys) != 1 || a.Keys[0] != rec.Key || a.ContentLength != int64(len(body)) ||
				a.Body != nil && !bytes.Equal(a.Body, body) {
				t.Fatalf("request %d carried keys %q, length %d, body %q; the record has key %q", i+1, a.Keys, a.ContentLength, a.Body, rec.Key)
			}
		}

		// Waits in (0, cap], none after the last attempt, none past the deadline.
		sleeps := clk.Sleeps()
		if len(sleeps) >= fuzzMaxAttempts {
			t.Fatalf("%d waits for at most %d attempts", len(sleeps), fuzzMaxAttempts)
		}
		limit := max(tr.cfg.MaxInterval, tr.cfg.MaxRetryAfter)
		var total time.Duration
		for _, d := range sleeps {
			if d <= 0 || d > limit {
				t.Fatalf("wait %v outside (0, %v]", d, limit)
			}
			total += d
		}
		if !deadline.IsZero() && !start.Add(total).Before(deadline) {
			t.Fatalf("waited %v in all, past the deadline %v away", total, deadline.Sub(start))
		}

		// No goroutine (so no connection, no unclosed body) outlives the call.
		j.Close()
		if n := leakcheck.Wait(before, 2*time.Second); n > before {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

func TestDefaultBaseChecksProxyConnect(t *testing.T) {
	ca := newTestCA(t, "idem CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
		func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
	tr, clk := memTransport(t, nil)
	t.Cleanup(tr.CloseIdleConnections)
	own, ok := tr.base().(*http.Transport)
	require.True(t, ok, "a clone of http.DefaultTransport")
	require.NotSame(t, http.DefaultTransport, own)
	require.Nil(t, http.DefaultTransport.(*http.Transport).OnProxyConnectResponse, "http.DefaultTransport is left alone")
	// ProxyFromEnvironment reads the environment once per process; point
	// this clone at the proxy directly.
	own.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: connectProxy(t, http.StatusProxyAuthRequired)})
	own.TLSClientConfig = &tls.Config{RootCAs: ca.pool}

	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, payload))
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	var perr *ProxyConnectError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusProxyAuthRequired, perr.StatusCode)
	rec := onlyRecordIn(t, tr.journal)
	require.Equal(t, StateFailed, rec.State)
	require.Equal(t, 1, rec.Attempts)
	require.Empty(t, clk.Sleeps())
}

// TestS43ProxyAuthOnCallerTransport: S43, a corporate proxy (a real
// loopback server) answers 407 to CONNECT, reached through the caller's own
// *http.Transport, which has a Proxy with wrong credentials and no
// OnProxyConnectResponse. One CONNECT, an error at once (the *ProxyConnectError,
// without the credentials), the operation failed after one attempt, and
// nothing left for Resume to send; the caller's Transport is left as it was.
func TestS43ProxyAuthOnCallerTransport(t *testing.T) {
	var connects, served atomic.Int32
	ca := newTestCA(t, "idem CA")
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, false, time.Now().Add(time.Hour))}}, false,
		func(w http.ResponseWriter, _ *http.Request) { served.Add(1); reply(w, http.StatusCreated) })
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			connects.Add(1)
		}
		w.Header().Set("Proxy-Authenticate", `Basic realm="corp"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	require.NoError(t, err)
	proxyURL.User = url.UserPassword("alice", "wrong-secret")
	base := tlsBase(t, ca.pool)
	base.Proxy = http.ProxyURL(proxyURL)

	c, err := Open(filepath.Join(t.TempDir(), "idem.journal"), &Options{Base: base})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(c.Transport().CloseIdleConnections)
	req := newRequest(t, http.MethodPost, srv.URL, payload)
	resp, err := c.HTTPClient().Do(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, ErrPermanent)
	require.NotErrorAs(t, err, new(*PendingError))
	var perr *ProxyConnectError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusProxyAuthRequired, perr.StatusCode)
	require.NotContains(t, err.Error(), "wrong-secret")
	require.Equal(t, int32(1), connects.Load())
	require.Zero(t, served.Load())

	rec := onlyRecordIn(t, c.Journal())
	require.Equal(t, StateFailed, rec.State)
	require.Equal(t, 1, rec.Attempts)
	n, err := c.Journal().PendingCount(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, resumeAll(t, c.Transport()))
	require.Equal(t, int32(1), connects.Load(), "Resume sends nothing")
	require.Nil(t, base.OnProxyConnectResponse, "the caller's Transport is left alone")
}

// TestCallerBase: a caller's Base is used as it is, unless it is an
// *http.Transport with a Proxy, which is used through a clone with the
// check installed after the caller's own hook; the caller's Transport is
// never modified.
func TestCallerBase(t *testing.T) {
	t.Run("no proxy", func(t *testing.T) {
		base := &http.Transport{}
		tr, _ := memTransport(t, &Options{Base: base})
		require.Same(t, base, tr.base())
		require.Nil(t, base.OnProxyConnectResponse)
	})
	t.Run("not an *http.Transport", func(t *testing.T) {
		inner := &http.Transport{Proxy: http.ProxyFromEnvironment}
		tr, _ := memTransport(t, &Options{Base: roundTripFunc(inner.RoundTrip)})
		_, ok := tr.base().(roundTripFunc)
		require.True(t, ok)
		require.Nil(t, inner.OnProxyConnectResponse)
	})
	t.Run("proxy", func(t *testing.T) {
		var mine int
		hook := func(context.Context, *url.URL, *http.Request, *http.Response) error { mine++; return nil }
		base := &http.Transport{Proxy: http.ProxyFromEnvironment, OnProxyConnectResponse: hook, MaxConnsPerHost: 3}
		tr, _ := memTransport(t, &Options{Base: base})
		clone, ok := tr.base().(*http.Transport)
		require.True(t, ok)
		require.NotSame(t, base, clone)
		require.Equal(t, 3, clone.MaxConnsPerHost, "the caller's settings")

		connect := &http.Request{Method: http.MethodConnect, Host: "pay.example:443"}
		refused := &http.Response{StatusCode: http.StatusProxyAuthRequired}
		proxy := &url.URL{Scheme: "http", Host: "proxy.example:3128"}
		err := clone.OnProxyConnectResponse(context.Background(), proxy, connect, refused)
		var perr *ProxyConnectError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, 1, mine, "the caller's hook runs first")
		// The caller's own Transport keeps its own hook, unchecked.
		require.NoError(t, base.OnProxyConnectResponse(context.Background(), proxy, connect, refused))
		require.Equal(t, 2, mine)
	})
}

// BenchmarkRoundTripJournaled measures a whole journaled POST through the
// Transport against a loopback server (write-ahead, attempt, settle), from
// one caller and from 64.
func BenchmarkRoundTripJournaled(b *testing.B) {
	benchRoundTrip(b, http.MethodPost, strings.Repeat("x", 200))
}

// BenchmarkRoundTripUnjournaled measures a GET through the Transport, which
// retries it but writes nothing: what idem costs every request that is not
// journaled once it replaces http.DefaultClient.
func BenchmarkRoundTripUnjournaled(b *testing.B) {
	benchRoundTrip(b, http.MethodGet, "")
}

// BenchmarkRoundTripBaseGET is BenchmarkRoundTripUnjournaled's GET sent
// through the base *http.Transport alone: the floor idem's GET is judged
// against, server included, in the same harness.
func BenchmarkRoundTripBaseGET(b *testing.B) {
	benchRoundTrip(b, "", "")
}

// benchRoundTrip sends method (or, for "", a GET straight through the base)
// with body to a loopback server.
func benchRoundTrip(b *testing.B, method, body string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	base.MaxIdleConnsPerHost = 64
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			j, _ := testJournal(b)
			tr, err := NewTransport(j, &Options{Base: base})
			if err != nil {
				b.Fatal(err)
			}
			var rt http.RoundTripper = tr
			m := method
			if m == "" {
				m, rt = http.MethodGet, base
			}
			send := func() bool {
				var rd io.Reader
				if body != "" {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest(m, srv.URL+"/payments", rd)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return false
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return true
			}
			b.ReportAllocs()
			b.ResetTimer()
			if callers == 1 {
				for i := 0; i < b.N && send(); i++ {
				}
				return
			}
			b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && send() {
				}
			})
		})
	}
}
