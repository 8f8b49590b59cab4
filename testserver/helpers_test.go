// helpers_test.go has the helpers the tests share: a server per test and plain requests.

package testserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// replayedHeader marks a replayed answer (package server sets it).
const replayedHeader = "Idempotent-Replayed"

// problemType returns the problem type name (e.g. "key-in-progress") of one of the
// middleware's RFC 9457 answers, or "" if a is not one.
func problemType(tb testing.TB, a answer) string {
	tb.Helper()
	if a.header.Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	require.NoError(tb, json.Unmarshal(a.body, &p), "body %s", a.body)
	_, name, ok := strings.Cut(p.Type, "#")
	require.True(tb, ok, "problem type %q", p.Type)
	return name
}

// newTestServer starts a server that the test's cleanup closes.
func newTestServer(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	s := NewServer(opts)
	tb.Cleanup(s.Close)
	return s
}

// payBody returns a valid POST /payments body for ref.
func payBody(ref string, amount int) string {
	return fmt.Sprintf(`{"amount": %d, "currency": "eur", "reference": %q}`, amount, ref)
}

// answer is a response read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request on a fresh connection, so net/http's Transport never re-sends it
// behind our back (it does so only on a reused connection), and reads the answer.
func do(tb testing.TB, req *http.Request, timeout time.Duration) (answer, error) {
	tb.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: timeout}
	resp, err := c.Do(req)
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

// postReq builds POST /payments with key (none if "") and extra headers as name, value pairs.
func postReq(tb testing.TB, s *Server, key, body string, headers ...string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/payments", strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(DefaultKeyHeader, key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// post sends POST /payments and requires an HTTP answer.
func post(tb testing.TB, s *Server, key, body string, headers ...string) answer {
	tb.Helper()
	a, err := do(tb, postReq(tb, s, key, body, headers...), 10*time.Second)
	require.NoError(tb, err)
	return a
}

// postErr sends POST /payments and requires a transport error, no answer.
func postErr(tb testing.TB, s *Server, key, body string) error {
	tb.Helper()
	_, err := do(tb, postReq(tb, s, key, body), 10*time.Second)
	require.Error(tb, err)
	return err
}

// get sends GET path.
func get(tb testing.TB, s *Server, path string) answer {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	require.NoError(tb, err)
	a, err := do(tb, req, 10*time.Second)
	require.NoError(tb, err)
	return a
}

// decodePayment decodes a payment answer.
func decodePayment(tb testing.TB, a answer) payment {
	tb.Helper()
	var p payment
	require.NoError(tb, json.Unmarshal(a.body, &p), "body %s", a.body)
	return p
}

// decodeList decodes the payments of a GET /payments?reference= answer.
func decodeList(tb testing.TB, a answer) []payment {
	tb.Helper()
	var list paymentList
	require.NoError(tb, json.Unmarshal(a.body, &list), "body %s", a.body)
	return list.Data
}

// waitHolding waits until n requests sit in a FaultHold.
func waitHolding(tb testing.TB, s *Server, n int64) {
	tb.Helper()
	require.Eventually(tb, func() bool { return s.holding.Load() == n },
		5*time.Second, time.Millisecond, "requests holding")
}
