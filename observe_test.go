// Tests for observe.go: what the Observer hears of a settle, a give-up, a
// resume, an expiry and a Close, and that the pending gauge adds up; the
// structured logs, which carry no secret; and ResponseInfo, which names the
// call behind every response idem returns.

package idem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/journal"
)

// recordingObserver keeps every report.
type recordingObserver struct {
	NopObserver
	mu          sync.Mutex
	attempts    []AttemptEvent
	retries     []RetryEvent
	results     []ResultEvent
	pending     int
	writeAheads []error
}

func (o *recordingObserver) Attempt(_ context.Context, e AttemptEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, e)
}

func (o *recordingObserver) Retry(_ context.Context, e RetryEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retries = append(o.retries, e)
}

func (o *recordingObserver) Result(_ context.Context, e ResultEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, e)
}

func (o *recordingObserver) PendingChanged(d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending += d
}

func (o *recordingObserver) WriteAhead(_ context.Context, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		panic("negative commit latency")
	}
	o.writeAheads = append(o.writeAheads, err)
}

func (o *recordingObserver) gauge() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending
}

func TestObserverSeesAttemptsRetriesAndSettle(t *testing.T) {
	obs := &recordingObserver{}
	tr, _, srv := memScenario(t, &Options{Observer: obs}, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			reply(w, http.StatusServiceUnavailable, "Retry-After", "1")
		case 2:
			reply(w, http.StatusInternalServerError)
		default:
			reply(w, http.StatusCreated)
		}
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.NoError(t, err)
	drain(t, resp)

	require.Equal(t, []error{nil}, obs.writeAheads)
	require.Len(t, obs.attempts, 3)
	for i, want := range []struct {
		status int
		class  Class
	}{{503, ClassRetry}, {500, ClassRetry}, {201, ClassFinal}} {
		a := obs.attempts[i]
		require.Equal(t, AttemptEvent{Method: "POST", Journaled: true, N: i + 1, Status: want.status, Class: want.class,
			Duration: a.Duration}, a)
	}
	require.Len(t, obs.retries, 2)
	require.Equal(t, RetryEvent{Method: "POST", Journaled: true, N: 1, Status: 503, Class: ClassRetry, Wait: time.Second, RetryAfter: true}, obs.retries[0])
	require.False(t, obs.retries[1].RetryAfter)
	require.Equal(t, []ResultEvent{{State: StateSettled, Status: 201, Attempts: 3}}, obs.results)
	require.Zero(t, obs.gauge(), "written ahead (+1), settled (-1)")

	// Unjournaled: attempts, no write-ahead, no result.
	resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)
	require.False(t, obs.attempts[3].Journaled)
	require.Len(t, obs.results, 1)
	require.Len(t, obs.writeAheads, 1)
}

func TestObserverPendingGaugeAcrossGiveUpResumeExpiryAndClose(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{}
	fail := true
	var mu sync.Mutex
	tr, clk, srv := memScenario(t, &Options{Observer: obs, MaxAttempts: 1, KeyTTL: time.Hour}, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			reply(w, http.StatusBadGateway)
			return
		}
		reply(w, http.StatusCreated)
	})
	for range 3 {
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
		pendingErr(t, err)
	}
	require.Equal(t, 3, obs.gauge())
	require.Len(t, obs.results, 3)
	require.Equal(t, StatePending, obs.results[0].State)

	// A resume that settles one: -1, reported as resumed.
	mu.Lock()
	fail = false
	mu.Unlock()
	clk.Advance(time.Minute)
	require.NoError(t, tr.Resume(WithMaxAttempts(context.Background(), 1), nil))
	require.Zero(t, obs.gauge())
	last := obs.results[len(obs.results)-1]
	require.True(t, last.Resumed)
	require.Equal(t, StateSettled, last.State)

	// One that expires.
	mu.Lock()
	fail = true
	mu.Unlock()
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{"b":1}`))
	pendingErr(t, err)
	require.Equal(t, 1, obs.gauge())
	clk.Advance(2 * time.Hour)
	var outs []Outcome
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { outs = append(outs, o) }))
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrKeyExpired)
	require.Zero(t, obs.gauge())
	require.Equal(t, ResultEvent{State: StateExpired, Status: 502, Attempts: 1, Resumed: true}, obs.results[len(obs.results)-1])
}

// A Client opened over a journal that holds pending operations adds them to
// the gauge, and takes them off when it is closed.
func TestObserverGaugeStartsFromTheJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	srv := newRecordingServer(t, nil, func(n int, w http.ResponseWriter, r *http.Request) { reply(w, http.StatusServiceUnavailable) })
	c, err := Open(path, &Options{Base: srv.base(), MaxAttempts: 1})
	require.NoError(t, err)
	for range 2 {
		_, err := c.HTTPClient().Post(srv.URL, "application/json", nil)
		var pe *PendingError
		require.True(t, errors.As(err, &pe))
	}
	require.NoError(t, c.Close())

	obs := &recordingObserver{}
	c, err = Open(path, &Options{Observer: obs})
	require.NoError(t, err)
	require.Equal(t, 2, obs.gauge())
	require.NoError(t, c.Close())
	require.Zero(t, obs.gauge())
	require.NoError(t, c.Close())
	require.Zero(t, obs.gauge(), "a second Close reports nothing")
}

func TestObserverWriteAheadFailure(t *testing.T) {
	obs := &recordingObserver{}
	tr, _, srv := newScenario(t, &Options{Observer: obs}, func(n int, w http.ResponseWriter, r *http.Request) { reply(w, http.StatusCreated) })
	require.NoError(t, tr.bolt().Close())
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	require.ErrorIs(t, err, journal.ErrClosed)
	require.Len(t, obs.writeAheads, 1)
	require.ErrorIs(t, obs.writeAheads[0], journal.ErrClosed)
	require.Zero(t, obs.gauge())
	require.Zero(t, srv.count())
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// records parses the JSON lines a slog.JSONHandler wrote.
func (s *syncBuffer) records(tb testing.TB) []map[string]any {
	tb.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		recs = append(recs, m)
	}
	return recs
}

// leakyBase fails one attempt in four, before sending, with an error that
// quotes the URL and the credentials, as a careless proxy or SDK might.
type leakyBase struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (b *leakyBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.n.Add(1)%4 == 0 {
		return nil, fmt.Errorf("proxy refused %s (Authorization %q, Cookie %q)",
			r.URL.String(), r.Header.Get("Authorization"), r.Header.Get("Cookie"))
	}
	return b.next.RoundTrip(r)
}

// A chaos run with credentials in the headers and the URL, and a secret in
// every body: the log has the records operators need, and none of the
// secrets.
func TestLogsCarryNoSecret(t *testing.T) {
	t.Parallel()
	const (
		token      = "tok-SECRET-bearer-4711"
		cookie     = "sid=SECRET-cookie-0815"
		bodySecret = "SECRET-card-4242424242424242"
		urlUser    = "SECRET-user-name"
		urlPass    = "SECRET-url-password"
		querySec   = "SECRET-query-apikey"
	)
	plan, err := testserver.ParsePlan(11, "lost=0.15,drop=0.1,reset=0.1,503=0.15,429date=0.1,500=0.1")
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{RequireKey: true, Plan: plan})
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	httpBase := &http.Transport{}
	t.Cleanup(httpBase.CloseIdleConnections)
	tr, clk := testTransport(t, &Options{Base: &leakyBase{next: httpBase}, Logger: logger, MaxAttempts: 3,
		MaxRetryAfter: 100 * time.Millisecond, KeyTTL: 2 * time.Hour,
		PrepareResume: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("Cookie", cookie)
			r.URL.User = url.UserPassword(urlUser, urlPass)
			return nil
		}})
	u, err := url.Parse(srv.URL + "/payments?api_key=" + querySec)
	require.NoError(t, err)
	u.User = url.UserPassword(urlUser, urlPass)

	var refs []string
	send := func(i int) error {
		ref := fmt.Sprintf("order-%d", i)
		body := fmt.Sprintf(`{"amount":%d,"currency":"eur","reference":%q,"card":%q}`, 100+i, ref, bodySecret)
		ctx := WithOperationID(context.Background(), ref+"/charge")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Cookie", cookie)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			drain(t, resp)
		}
		return err
	}
	for i := range 40 {
		refs = append(refs, fmt.Sprintf("order-%d", i))
		if err := send(i); err != nil {
			var pe *PendingError
			require.True(t, errors.As(err, &pe), "order-%d: %v", i, err)
		}
	}
	// Resume until everything is settled.
	for range 20 {
		clk.Advance(time.Minute)
		require.NoError(t, tr.Resume(context.Background(), nil))
		if countState(t, tr.bolt(), StatePending) == 0 {
			break
		}
	}
	require.Zero(t, countState(t, tr.bolt(), StatePending))
	require.NoError(t, srv.Ledger().Check(refs))
	// And one that expires: pending longer than KeyTTL.
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus, Status: 503}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503},
		testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	tr.cfg.Base = httpBase
	require.Error(t, send(99))
	clk.Advance(3 * time.Hour)
	require.NoError(t, tr.Resume(context.Background(), nil))

	out := logs.String()
	for _, secret := range []string{token, cookie, "SECRET-cookie", bodySecret, urlUser, urlPass, querySec, "SECRET"} {
		require.NotContains(t, out, secret)
	}

	seen := map[string]int{}
	results := map[string]int{}
	for _, r := range logs.records(t) {
		msg := r["msg"].(string)
		seen[msg]++
		require.Contains(t, r["url"], "/payments", msg)
		require.NotEmpty(t, r["key"], msg)
		require.Regexp(t, `^order-\d+/charge$`, r["op"], msg)
		switch msg {
		case "idem: retrying":
			for _, f := range []string{"attempt", "max_attempts", "class", "wait", "status"} {
				require.Contains(t, r, f)
			}
			require.Equal(t, "INFO", r["level"])
		case "idem: operation left pending":
			require.Equal(t, "WARN", r["level"])
			require.Contains(t, r, "next_attempt")
		case "idem: resume outcome":
			results[r["result"].(string)]++
		}
	}
	require.Positive(t, seen["idem: retrying"], out)
	require.Positive(t, seen["idem: operation left pending"], out)
	require.Positive(t, results["settled"], out)
	require.Equal(t, 1, results["expired"], out)
	require.Contains(t, out, "[redacted]", "the leaky error was logged, masked")

	// The journal keeps last errors masked too.
	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	for _, secret := range []string{token, "SECRET-cookie", urlPass, urlUser} {
		require.NotContains(t, string(raw), secret)
	}
}

func TestLoggerNilIsSilentAndLevelsAreHonoured(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr, _, srv := memScenario(t, &Options{Logger: logger, MaxAttempts: 2}, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, `{}`))
	pendingErr(t, err)
	out := logs.String()
	require.NotContains(t, out, "idem: retrying", "Info records are below the handler's level")
	require.Contains(t, out, "idem: operation left pending")

	quiet, _, srv2 := memScenario(t, nil, func(n int, w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusServiceUnavailable)
	})
	require.Nil(t, quiet.cfg.Logger)
	_, err = quiet.RoundTrip(newRequest(t, http.MethodPost, srv2.URL, `{}`))
	pendingErr(t, err) // and no panic on a nil Logger
}

func TestLogURLDropsUserinfoAndQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@api.example/payments?key=k#f": "https://api.example/payments",
		"http://127.0.0.1:8080/a%2Fb":              "http://127.0.0.1:8080/a%2Fb",
		"http:user:pass@host/x":                    "http:",
	} {
		u, err := url.Parse(in)
		require.NoError(t, err)
		require.Equal(t, want, logURL(u), in)
	}
}

type quotingBase struct{}

func (quotingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("proxy failed for %s (redacted %s)", r.URL, r.URL.Redacted())
}

// Review (final), fixed: a base RoundTripper that quotes the URL in its error
// put the fragment, and a percent-encoded query value, in LastError, which
// the journal keeps in plaintext. maskErr now masks the URL as quoted, the
// fragment, and each query value as written.
func TestReviewURLQuotedInErrorNotJournaled(t *testing.T) {
	t.Parallel()
	const frag, query = "FRAGSECRET123", "tok%2Fen-77"
	tr, _ := testTransport(t, &Options{Base: quotingBase{}, MaxAttempts: 1, SensitiveQueryParams: []string{"key"}})
	req := newRequest(t, http.MethodPost, "https://user:pw-secret-9@api.test/p?key="+query+"#access_token="+frag,
		paymentBody("order-quoted", 1))
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	rec := onlyRecord(t, tr)
	require.Contains(t, rec.LastError, "proxy failed for https://api.test/p")
	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	for _, secret := range []string{frag, query, "tok/en-77", "pw-secret-9"} {
		require.False(t, bytes.Contains(raw, []byte(secret)), "the journal file holds %q", secret)
	}
}

func TestResponseInfo(t *testing.T) {
	t.Parallel()
	const wire = "(the key the server saw)"
	cases := []struct {
		name string
		opts *Options
		// call returns the response under test; tr and srv are the case's own.
		call func(t *testing.T, tr *Transport, clk *fakeClock, url string) *http.Response
		want Info
	}{
		{
			name: "minted key",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-1", 1)))
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire, Journaled: true},
		},
		{
			name: "caller key in the header",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-2", 1))
				req.Header.Set(DefaultKeyHeader, "caller-key-2")
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: "caller-key-2", Journaled: true},
		},
		{
			name: "WithKey on a GET journals it",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodGet, url+"/payments/1", "")
				req = req.WithContext(WithKey(req.Context(), "caller-key-3"))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: "caller-key-3", Journaled: true},
		},
		{
			name: "WithOperationID",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-4", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-4/charge"))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-4/charge", Journaled: true},
		},
		{
			name: "a settled operation called again (the server replays)",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				send := func() *http.Response {
					req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-5", 1))
					req = req.WithContext(WithOperationID(req.Context(), "order-5/charge"))
					resp, err := tr.RoundTrip(req)
					require.NoError(t, err)
					return resp
				}
				drain(t, send())
				return send()
			},
			want: Info{Key: wire, OperationID: "order-5/charge", Journaled: true},
		},
		{
			name: "unjournaled GET",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, url+"/payments/1", ""))
				require.NoError(t, err)
				return resp
			},
			want: Info{},
		},
		{
			name: "WithoutJournal POST: a key in memory only",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/payments", paymentBody("info-7", 1))
				req = req.WithContext(WithoutJournal(req.Context()))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				return resp
			},
			want: Info{Key: wire},
		},
		{
			name: "an http.Client following a 307",
			call: func(t *testing.T, tr *Transport, _ *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/redirect", paymentBody("info-8", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-8/charge"))
				resp, err := (&http.Client{Transport: tr}).Do(req)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-8/charge", Journaled: true},
		},
		{
			name: "Resume's Outcome.Response",
			opts: &Options{MaxAttempts: 1},
			call: func(t *testing.T, tr *Transport, clk *fakeClock, url string) *http.Response {
				req := newRequest(t, http.MethodPost, url+"/flaky", paymentBody("info-9", 1))
				req = req.WithContext(WithOperationID(req.Context(), "order-9/charge"))
				_, err := tr.RoundTrip(req)
				pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
				var resp *http.Response
				require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
					require.NoError(t, o.Err)
					resp = o.Response
				}))
				require.NotNil(t, resp)
				return resp
			},
			want: Info{Key: wire, OperationID: "order-9/charge", Journaled: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, clk, srv := memScenario(t, tc.opts, func(n int, w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/redirect":
					w.Header().Set("Location", "/payments")
					reply(w, http.StatusTemporaryRedirect)
				case r.URL.Path == "/flaky" && n == 1:
					reply(w, http.StatusServiceUnavailable)
				case r.Method == http.MethodGet:
					reply(w, http.StatusOK)
				default:
					reply(w, http.StatusCreated)
				}
			})
			resp := tc.call(t, tr, clk, srv.URL)
			drain(t, resp)
			want := tc.want
			if want.Key == wire {
				want.Key = sameKey(t, srv.requests())
			}
			for _, r := range srv.requests() {
				require.Equal(t, want.Key, r.Header.Get(DefaultKeyHeader), "the key on the wire")
			}
			got, ok := ResponseInfo(resp)
			require.True(t, ok, "a response idem returned")
			require.Equal(t, want, got)
		})
	}
}

// A response idem did not return, or none, has no Info.
func TestResponseInfoNone(t *testing.T) {
	t.Parallel()
	_, ok := ResponseInfo(nil)
	require.False(t, ok)
	_, ok = ResponseInfo(&http.Response{})
	require.False(t, ok)
	req := newRequest(t, http.MethodPost, "http://127.0.0.1/payments", "")
	_, ok = ResponseInfo(&http.Response{Request: req})
	require.False(t, ok)
}

// A base RoundTripper may answer with a response whose Request is not the
// attempt's (none, or a copy without its context): the Info is still found,
// on the request idem sent.
func TestResponseInfoForeignRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  func(sent *http.Request) *http.Request
	}{
		{"nil", func(*http.Request) *http.Request { return nil }},
		{"other context", func(sent *http.Request) *http.Request { return sent.WithContext(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: tc.req(r)}, nil
			})
			tr, _ := memTransport(t, &Options{Base: base})
			resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1/payments", `{"a":1}`))
			require.NoError(t, err)
			resp.Body.Close()
			info, ok := ResponseInfo(resp)
			require.True(t, ok)
			require.True(t, info.Journaled)
			require.Len(t, info.Key, 36)
		})
	}
}

// Until the call returns it, a response has no Info: a Classifier (or a
// base RoundTripper) looking at an attempt's response sees what it would
// for a response idem did not return.
func TestResponseInfoOnlyOnceReturned(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		status := http.StatusServiceUnavailable
		if calls.Add(1) > 1 {
			status = http.StatusCreated
		}
		return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
	})
	var seen []bool
	classify := func(a Attempt) Class {
		_, ok := ResponseInfo(a.Response)
		seen = append(seen, ok)
		return DefaultClassifier(a)
	}
	tr, _ := memTransport(t, &Options{Base: base, Classifier: classify})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://127.0.0.1/payments", `{"a":1}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, []bool{false, false}, seen, "the 503's and the 201's Info while the call ran")
	info, ok := ResponseInfo(resp)
	require.True(t, ok)
	require.True(t, info.Journaled)
}
