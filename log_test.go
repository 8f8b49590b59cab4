// Tests for the structured logs (log.go): the records a retry, a give-up and
// a resume produce, and that no secret, body or sensitive header value ever
// reaches a log line, even through an error text that quotes them.

package idem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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
