// Tests for request.go: what net/http would refuse is refused before the
// write-ahead; idempotency keys and operation IDs minted, validated and kept
// on every attempt (S16, S17, with fuzz targets); the journaled URL without
// userinfo, fragment or sensitive query parameters; and the stored headers,
// so no secret is at rest in the journal file.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// FuzzPlainURL holds validRequest's and storedURL's shortcuts to the
// parser round trips they skip: a URL plainURL accepts must parse back, and
// storedURL must journal what it journaled when it always parsed again
// (storedURLReparsed, the code before the shortcut).
func FuzzPlainURL(f *testing.F) {
	for _, s := range [][7]string{
		{"127.0.0.1:8080", "/payments", "", "", "", "", ""},
		{"api.example.com", "/v1/charges", "", "a=1&token=s3cret", "frag", "", ""},
		{"example.com:", "/", "", "", "", "", ""},
		{"exa mple.com", "/", "", "", "", "", ""},
		{"example.com:99999", "/", "", "", "", "", ""},
		{"example.com:80x", "/", "", "", "", "", ""},
		{"[::1]:8080", "/p", "", "", "", "", ""},
		{"user@host", "/p", "", "", "", "", ""},
		{"host", "/a?b#c", "", "x=1#token=2", "", "", ""},
		{"host", "/a%2Fb", "/a%2Fb", "q=\x7f", "", "", ""},
		{"host", "no-slash", "", "", "", "alice:pw", ""},
		{"host", "", "", "", "", "", "//evil@host/?token=1"},
		{"host/x", "/", "", "token=1", "", "", ""},
		{"host#x", "/", "", "", "", "", ""},
		{"h\x00st", "/", "", "", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], false)
	}
	sensitive := map[string]bool{"token": true}
	f.Fuzz(func(t *testing.T, host, path, rawPath, rawQuery, fragment, user, opaque string, https bool) {
		u := &url.URL{Scheme: "http", Host: host, Path: path, RawPath: rawPath, RawQuery: rawQuery,
			Fragment: fragment, Opaque: opaque}
		if https {
			u.Scheme = "https"
		}
		if user != "" {
			u.User = url.User(user)
		}
		if plainURL(u) {
			if _, err := url.Parse(u.String()); err != nil {
				t.Fatalf("plainURL(%#v) = true, but %q does not parse: %v", u, u.String(), err)
			}
		}
		for _, names := range []map[string]bool{nil, sensitive} {
			got, gotDropped := storedURL(u, names)
			want, wantDropped := storedURLReparsed(u, names)
			if got != want || !slices.Equal(gotDropped, wantDropped) {
				t.Fatalf("storedURL(%#v) = %q %q, want %q %q", u, got, gotDropped, want, wantDropped)
			}
		}
	})
}

// storedURLReparsed is storedURL as it was before it skipped parsing
// again: the oracle of FuzzPlainURL.
func storedURLReparsed(u *url.URL, sensitive map[string]bool) (string, []string) {
	c := *u
	c.User, c.Fragment, c.RawFragment = nil, "", ""
	var dropped []string
	c.RawQuery, dropped = stripQuery(c.RawQuery, sensitive)
	s := c.String()
	if p, err := url.Parse(s); err == nil {
		q, more := stripQuery(p.RawQuery, sensitive)
		if p.User != nil || more != nil || p.Fragment != "" {
			p.User, p.RawQuery, p.Fragment, p.RawFragment = nil, q, "", ""
			s = p.String()
			dropped = append(dropped, more...)
			slices.Sort(dropped)
			dropped = slices.Compact(dropped)
		}
	}
	return s, dropped
}

func TestPlainURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{"http://127.0.0.1:8080/payments", true},
		{"https://api.example.com/v1/charges?a=1", true},
		{"http://example.com/", true},
		{"http://example.com:/", false},  // empty port: left to the parser
		{"http://[::1]:8080/", false},    // IPv6 literal: left to the parser
		{"http://alice:pw@host/", false}, // userinfo
		{"http://xn--bcher-kva.example/", true},
		{"http://host:123456/", false}, // port of 6 digits
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := plainURL(u); got != c.want {
			t.Errorf("plainURL(%q) = %v, want %v", c.raw, got, c.want)
		}
	}
	// What url.Parse would refuse never takes the shortcut.
	for _, u := range []*url.URL{
		{Scheme: "http", Host: "exa mple.com", Path: "/"},
		{Scheme: "http", Host: "host", Path: "/", RawQuery: "a=\x01"},
		{Scheme: "http", Host: "h\x7fst", Path: "/"},
	} {
		if plainURL(u) {
			t.Errorf("plainURL(%#v) = true for a URL that does not parse back", u)
		}
	}
}

// Request inputs that net/http refuses before writing a byte (a control
// character or DEL in a header value, a port out of range) are refused with
// ErrInvalidRequest before the write-ahead: journaled, they would be retried in
// vain and re-sent by every Resume until KeyTTL.
func TestReviewBadInputRefusedBeforeJournal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		build func(base string) *http.Request
	}{
		{"control character 0x01 in a header value", func(base string) *http.Request {
			req := newRequest(t, http.MethodPost, base+"/payments", paymentBody("order-ctl", 1))
			req.Header["X-Note"] = []string{"a\x01b"}
			return req
		}},
		{"DEL in a header value", func(base string) *http.Request {
			req := newRequest(t, http.MethodPost, base+"/payments", paymentBody("order-del", 1))
			req.Header["X-Note"] = []string{"a\x7fb"}
			return req
		}},
		{"port out of range", func(string) *http.Request {
			return newRequest(t, http.MethodPost, "http://127.0.0.1:99999/payments", paymentBody("order-port", 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, srv := newScenario(t, &Options{MaxAttempts: 2},
				func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusCreated) })
			resp, err := bounded(t, func() (*http.Response, error) { return tr.RoundTrip(tc.build(srv.URL)) })
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidRequest, "got %v", err)
			require.Zero(t, srv.count(), "nothing sent")
			recs, rerr := tr.bolt().Records()
			require.NoError(t, rerr)
			require.Empty(t, recs, "nothing journaled, nothing left pending")
		})
	}
}

func TestUnsendableRequestRefusedUpFront(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*http.Request) *http.Request
	}{
		{"header name with a space", func(r *http.Request) *http.Request {
			r.Header["Bad Header"] = []string{"x"}
			return r
		}},
		{"header value with CR", func(r *http.Request) *http.Request {
			r.Header.Set("X-Note", "a\rb")
			return r
		}},
		{"header value with LF", func(r *http.Request) *http.Request {
			r.Header.Set("X-Note", "a\nX-Injected: 1")
			return r
		}},
		{"method with a space", func(r *http.Request) *http.Request {
			// With an operation ID it would be journaled, were it accepted.
			r = r.WithContext(WithOperationID(r.Context(), "op-r10"))
			r.Method = "BAD METHOD"
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk, srv := newScenario(t, nil, created)
			req, body := paymentRequest(t, context.Background(), srv.URL, "order-r10", 1000)
			resp, err := tr.RoundTrip(tt.edit(req))
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidRequest)
			noRequests(t, tr, srv)
			require.Empty(t, clk.Sleeps(), "refused, not retried")
			require.EqualValues(t, 1, body.closes.Load())
		})
	}
}

func TestOpaqueURLUserinfoNotJournaled(t *testing.T) {
	t.Parallel()
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1}, created)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody("order-r12", 1200))
	req.URL = &url.URL{Scheme: "http", Host: u.Host, Opaque: "//user:S3CR3T@" + u.Host + "/payments"}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "http://"+u.Host+"/payments", onlyRecord(t, tr).URL)

	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte("S3CR3T")), "the password is in the journal file")
}

// A sensitive parameter in the URL's fragment ("#access_token=...", the OAuth
// implicit-flow shape) never reaches the journal: net/http never sends a
// fragment, so the journaled URL leaves it out and Resume loses nothing.
func TestReviewSensitiveParamInFragmentNotJournaled(t *testing.T) {
	t.Parallel()
	const secret = "FRAGSECRET-9d8e7f"
	tr, _, srv := newScenario(t, &Options{MaxAttempts: 1, SensitiveQueryParams: []string{"access_token"}},
		func(_ int, w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusServiceUnavailable) })
	req := newRequest(t, http.MethodPost, srv.URL+"/payments?a=1&access_token="+secret+"#access_token="+secret,
		paymentBody("order-frag", 1))
	_, err := tr.RoundTrip(req)
	pendingErr(t, err)
	require.NoError(t, tr.bolt().Close())
	raw, err := os.ReadFile(tr.bolt().Path())
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte(secret)), "the journal file holds the sensitive parameter's value")
}

func TestInvalidCallerKeyRefused(t *testing.T) {
	t.Parallel()
	header := func(k string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { r.Header["Idempotency-Key"] = []string{k}; return r }
	}
	withKey := func(k string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { return r.WithContext(WithKey(r.Context(), k)) }
	}
	tests := []struct {
		name   string
		method string
		set    func(*http.Request) *http.Request
	}{
		{"empty header", http.MethodPost, header("")},
		{"empty WithKey", http.MethodPost, withKey("")},
		{"256 characters", http.MethodPost, header(strings.Repeat("k", 256))},
		{"256 characters WithKey", http.MethodPost, withKey(strings.Repeat("k", 256))},
		{"CR", http.MethodPost, header("abc\rdef")},
		{"LF", http.MethodPost, header("abc\ndef")},
		{"CRLF header injection", http.MethodPost, withKey("abc\r\nX-Injected: 1")},
		{"NUL", http.MethodPost, header("abc\x00")},
		{"tab", http.MethodPost, header("abc\tdef")},
		{"DEL", http.MethodPost, header("abc\x7f")},
		{"non-ASCII", http.MethodPost, header("clé-ключ")},
		{"non-ASCII WithKey", http.MethodPost, withKey("k\xffey")},
		{"leading space", http.MethodPost, header(" abc")},
		{"two Idempotency-Key headers", http.MethodPost, func(r *http.Request) *http.Request {
			r.Header.Add("Idempotency-Key", "key-one")
			r.Header.Add("Idempotency-Key", "key-two")
			return r
		}},
		{"one key in two spellings", http.MethodPost, func(r *http.Request) *http.Request {
			r.Header["Idempotency-Key"] = []string{"key-one"}
			r.Header["idempotency-key"] = []string{"key-one"}
			return r
		}},
		{"empty operation ID", http.MethodPost, func(r *http.Request) *http.Request {
			return r.WithContext(WithOperationID(r.Context(), ""))
		}},
		{"operation ID with LF", http.MethodPost, func(r *http.Request) *http.Request {
			return r.WithContext(WithOperationID(r.Context(), "order-1\ncharge"))
		}},
		{"invalid key on a journaled PATCH", http.MethodPatch, header("abc\rdef")},
		// Visible ASCII only, as the server middleware refuses a key with a space.
		{"key with a space", http.MethodPost, header("inner space")},
		// Not journaled, but the key still goes on the wire: the same rules.
		{"empty header on a PUT", http.MethodPut, header("")},
		{"LF on a PUT", http.MethodPut, header("abc\ndef")},
		{"two keys on a DELETE", http.MethodDelete, func(r *http.Request) *http.Request {
			r.Header.Add("Idempotency-Key", "key-one")
			r.Header.Add("Idempotency-Key", "key-two")
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := newWireLog(t)
			wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
				return synthetic(r, http.StatusCreated), nil
			}
			j := memStore(t)
			tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
			req, body := paymentRequest(t, context.Background(), "http://127.0.0.1:9", "order-k", 1)
			req.Method = tt.method
			req = tt.set(req)

			resp, err := tr.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrInvalidKey)
			require.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed once")
			require.Empty(t, wire.sent(), "nothing sent")
			recs, err := j.Records()
			require.NoError(t, err)
			require.Empty(t, recs, "nothing written")
		})
	}
}

// An operation ID may hold spaces inside: it never goes on the wire.
func TestOperationIDWithSpaces(t *testing.T) {
	t.Parallel()
	require.NoError(t, validateOperationID("charge order 4827"))
	for _, id := range []string{" lead", "trail ", "tab\tinside"} {
		require.ErrorIs(t, validateOperationID(id), ErrInvalidKey, "%q", id)
	}
}

func TestCallerKeyLimitsAccepted(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"k",
		strings.Repeat("k", 255),
		`"quoted"/with~every!visible#char`,
	} {
		wire := newWireLog(t)
		wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
			return synthetic(r, http.StatusCreated), nil
		}
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), "http://127.0.0.1:9", "order-k", 1)
		req.Header.Set("Idempotency-Key", key)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, "%q", key)
		resp.Body.Close()
		wire.requireOneKey(t, key)
		require.Equal(t, key, onlyRecordIn(t, j).Key)
	}
}

func TestS16_CallerKeyKeptOnEveryAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  func(r *http.Request, key string) *http.Request
	}{
		{"canonical header", func(r *http.Request, key string) *http.Request {
			r.Header.Set("Idempotency-Key", key)
			return r
		}},
		{"lower-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["idempotency-key"] = []string{key}
			return r
		}},
		{"upper-case header map key", func(r *http.Request, key string) *http.Request {
			r.Header["IDEMPOTENCY-KEY"] = []string{key}
			return r
		}},
		{"WithKey", func(r *http.Request, key string) *http.Request {
			return r.WithContext(WithKey(r.Context(), key))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startPayments(t, nil)
			srv.Script(status503, status503, status503)
			wire := newWireLog(t)
			j, _ := testJournal(t)
			tr, clk := transportOn(t, j, Options{MaxAttempts: 3}, wire, time.Time{})

			// No space in the key: the client accepts one inside, but the testserver's
			// middleware (package server) takes only visible ASCII and answers 400.
			key := "caller-key-" + strings.ReplaceAll(tt.name, " ", "-")
			req, body := paymentRequest(t, context.Background(), srv.URL, "order-s16", 700)
			req = tt.set(req, key)
			header := req.Header.Clone()
			_, err := tr.RoundTrip(req)
			perr := pendingErr(t, err)
			require.Equal(t, key, perr.Key)
			require.Equal(t, 3, perr.Attempts)
			require.Equal(t, header, req.Header, "the caller's request is not modified")
			require.EqualValues(t, 1, body.closes.Load())

			// A restart: the resumed attempt carries the caller's key too.
			tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Hour))
			outs := resumeAll(t, tr2)
			require.Len(t, outs, 1)
			require.NoError(t, outs[0].Err)
			require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
			require.Equal(t, key, outs[0].Record.Key)

			require.Len(t, wire.sent(), 4)
			wire.requireOneKey(t, key)
			require.Equal(t, 1, srv.Ledger().Effects["order-s16"])
		})
	}
}

func TestS17_OneKeyAcrossStatusesAndRestart(t *testing.T) {
	t.Parallel()
	status429 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusTooManyRequests}
	status500 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusInternalServerError}
	status502 := testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusBadGateway}
	want := []byte(paymentBody("order-s17", 1250))

	requireSameBytes := func(t *testing.T, wire *wireLog, key string) {
		t.Helper()
		sent := wire.sent()
		require.Len(t, sent, 3)
		wire.requireOneKey(t, key)
		for i, a := range sent {
			require.Equal(t, string(want), string(a.Body), "attempt %d", i+1)
			require.EqualValues(t, len(want), a.ContentLength, "attempt %d", i+1)
		}
	}

	t.Run("one process", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status500)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Len(t, clk.Sleeps(), 2)

		rec := onlyRecordOf(t, j)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts)
		requireSameBytes(t, wire, rec.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})

	t.Run("restart in the middle", func(t *testing.T) {
		srv := startPayments(t, nil)
		srv.Script(status429, status502)
		wire := newWireLog(t)
		j, _ := testJournal(t)
		tr, clk := transportOn(t, j, Options{MaxAttempts: 2}, wire, time.Time{})
		req, _ := paymentRequest(t, context.Background(), srv.URL, "order-s17", 1250)
		_, err := tr.RoundTrip(req)
		perr := pendingErr(t, err)
		require.Equal(t, http.StatusBadGateway, perr.LastStatus)
		require.Equal(t, 0, srv.Ledger().Payments())

		// The process stops here; the next one opens the same file.
		tr2, _ := transportOn(t, reopen(t, j), Options{}, wire, clk.Now().Add(time.Minute))
		outs := resumeAll(t, tr2)
		require.Len(t, outs, 1)
		require.NoError(t, outs[0].Err)
		require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)

		rec := onlyRecordOf(t, tr2.bolt())
		require.Equal(t, perr.Key, rec.Key)
		require.Equal(t, StateSettled, rec.State)
		require.Equal(t, 3, rec.Attempts, "attempts count across process lifetimes")
		requireSameBytes(t, wire, perr.Key)
		require.Equal(t, 1, srv.Ledger().Effects["order-s17"])
	})
}

// A minted key is a version 4 UUID of the RFC 9562 variant, fresh each time.
func TestNewKeyIsRandomUUIDv4(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for range 1000 {
		k, err := newKey()
		require.NoError(t, err)
		u, err := uuid.Parse(k)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(4), u.Version(), k)
		require.Equal(t, uuid.RFC4122, u.Variant(), k)
		require.Equal(t, u.String(), k, "canonical form")
		require.False(t, seen[k], "key %s minted twice", k)
		seen[k] = true
	}
}

// keyOracle is DESIGN "Transport semantics" 2 in its plainest form: visible
// ASCII is '!' to '~'.
func keyOracle(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for _, c := range []byte(k) {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// opIDOracle is keyOracle with spaces allowed inside.
func opIDOracle(id string) bool {
	if len(id) < 1 || id[0] == ' ' || id[len(id)-1] == ' ' {
		return false
	}
	return keyOracle(strings.ReplaceAll(id, " ", "-"))
}

func FuzzValidateKey(f *testing.F) {
	f.Add("order-4827/charge", "", uint8(0))
	f.Add("abc\r\nX-Injected: 1", "other", uint8(1))
	f.Fuzz(func(t *testing.T, k, k2 string, how uint8) {
		err := validateKey("idempotency key", k)
		if want := keyOracle(k); (err == nil) != want {
			t.Fatalf("validateKey(%q) = %v, want accepted=%v", k, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("validateKey(%q) = %v, not ErrInvalidKey", k, err)
		}

		// callerKey, with the key in the context or in one or two headers.
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/payments", nil)
		want, wantHas, wantOK := k, true, keyOracle(k)
		switch how % 5 {
		case 0: // WithKey wins over any header
			req = req.WithContext(WithKey(req.Context(), k))
			req.Header.Set(DefaultKeyHeader, k2)
		case 1:
			req.Header[DefaultKeyHeader] = []string{k}
		case 2: // a spelling net/http would not produce
			req.Header["idempotency-KEY"] = []string{k}
		case 3: // two values, in one spelling or two, even equal ones, are refused
			req.Header[DefaultKeyHeader] = []string{k}
			if how&8 != 0 {
				req.Header.Add(DefaultKeyHeader, k2)
			} else {
				req.Header["idempotency-key"] = []string{k2}
			}
			want, wantOK = "", false
		case 4:
			want, wantHas, wantOK = "", false, true
		}
		var tr Transport
		tr.setup()
		co, err := tr.callOptionsOf(req.Context())
		if err != nil {
			t.Fatal(err)
		}
		got, has, err := callerKey(req, DefaultKeyHeader, &co)
		if has != wantHas || (err == nil) != wantOK || (err == nil && got != want) {
			t.Fatalf("callerKey(%d, %q, %q) = %q, %v, %v; want %q, %v, ok=%v", how%5, k, k2, got, has, err, want, wantHas, wantOK)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("callerKey: %v, not ErrInvalidKey", err)
		}
	})
}

// FuzzTransportKey sends one journaled POST with a fuzzed caller key (header
// or WithKey) and operation ID through a Transport over a fresh journal.
// Invalid: ErrInvalidKey, body closed once, nothing written, nothing sent.
// Valid: one attempt carrying exactly that key, and one record holding it.
func FuzzTransportKey(f *testing.F) {
	f.Add("k", "", uint8(0))
	f.Add("k", "order-1\ncharge", uint8(3))
	f.Fuzz(func(t *testing.T, key, opID string, how uint8) {
		wire := newWireLog(t)
		wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
			return synthetic(r, http.StatusCreated), nil
		}
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
		ctx := context.Background()
		hasKey, hasOp := how&1 == 0 || how&4 != 0, how&2 != 0
		if hasOp {
			ctx = WithOperationID(ctx, opID)
		}
		if how&4 != 0 {
			ctx = WithKey(ctx, key)
		}
		req, body := paymentRequest(t, ctx, "http://127.0.0.1:9", "order-k", 1)
		if how&1 == 0 {
			req.Header[DefaultKeyHeader] = []string{key}
		}
		valid := (!hasKey || keyOracle(key)) && (!hasOp || opIDOracle(opID))

		resp, err := tr.RoundTrip(req)
		if n := body.closes.Load(); n != 1 {
			t.Fatalf("the caller's body was closed %d times", n)
		}
		recs, rerr := j.Records()
		if rerr != nil {
			t.Fatal(rerr)
		}
		sent := wire.sent()
		if !valid {
			if resp != nil || !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("key %q, operation ID %q (how %d): %v, %v; want ErrInvalidKey", key, opID, how, resp, err)
			}
			if len(recs) != 0 || len(sent) != 0 {
				t.Fatalf("invalid key %q / operation ID %q: %d records written, %d attempts sent", key, opID, len(recs), len(sent))
			}
			return
		}
		if err != nil || resp == nil {
			t.Fatalf("key %q, operation ID %q (how %d): %v, %v", key, opID, how, resp, err)
		}
		resp.Body.Close()
		if len(recs) != 1 || len(sent) != 1 || len(sent[0].Keys) != 1 || sent[0].Keys[0] != recs[0].Key {
			t.Fatalf("%d records, attempts %+v", len(recs), sent)
		}
		if hasKey && recs[0].Key != key || hasOp && recs[0].OperationID != opID {
			t.Fatalf("record key %q, operation ID %q; the caller gave %q, %q", recs[0].Key, recs[0].OperationID, key, opID)
		}
	})
}

func TestStoredURLStripsSensitiveQuery(t *testing.T) {
	sensitive := map[string]bool{"token": true, "sig": true}
	for _, tc := range []struct {
		in, want string
		dropped  []string
	}{
		{"https://api.test/p?a=1&token=t1&b=2", "https://api.test/p?a=1&b=2", []string{"token"}},
		{"https://api.test/p?token=t1", "https://api.test/p", []string{"token"}},
		{"https://api.test/p?sig=s&token=t1&token=t2", "https://api.test/p", []string{"sig", "token"}},
		{"https://api.test/p?to%6Ben=t1&z=%20", "https://api.test/p?z=%20", []string{"token"}}, // decoded name
		{"https://api.test/p?Token=t1&tokens=2", "https://api.test/p?Token=t1&tokens=2", nil},  // exact match only
		{"https://api.test/p?b=2&a=1&b=1", "https://api.test/p?b=2&a=1&b=1", nil},              // order and bytes kept
		{"https://api.test/p?a=1#access_token=t1", "https://api.test/p?a=1", nil},              // the fragment is never sent
		{"https://api.test/p?a=1&&token=t1", "https://api.test/p?a=1&", []string{"token"}},
		{"https://u:pw@api.test/p?token=t1&a=1", "https://api.test/p?a=1", []string{"token"}},
		{"https://api.test/p?%zz=1&token=t1", "https://api.test/p?%zz=1", []string{"token"}},
	} {
		u, err := url.Parse(tc.in)
		require.NoError(t, err, tc.in)
		got, dropped := storedURL(u, sensitive)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.dropped, dropped, tc.in)
	}
	// An opaque URL hiding userinfo and the parameter is stripped too.
	u := &url.URL{Scheme: "https", Opaque: "//u:pw@api.test/p", RawQuery: "token=t1&a=1"}
	got, dropped := storedURL(u, sensitive)
	require.Equal(t, "https://api.test/p?a=1", got)
	require.Equal(t, []string{"token"}, dropped)
}

func TestSensitiveQueryFingerprint(t *testing.T) {
	// The fingerprint is taken without the sensitive parameters: calling
	// again with a fresh token, under a declared identity, is the same
	// operation, and the server gets that call's token on the wire; a change
	// to another parameter is another request. (With no identity declared,
	// a fresh token is other credentials: identity_test.go.)
	tr, clk, srv := memScenario(t, &Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}},
		func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				reply(w, http.StatusServiceUnavailable)
				return
			}
			reply(w, http.StatusCreated)
		})
	var queries []string
	base := tr.cfg.Base
	tr.cfg.Base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		queries = append(queries, r.URL.RawQuery)
		return base.RoundTrip(r)
	})
	call := func(query string) (*http.Response, error) {
		req := newRequest(t, http.MethodPost, srv.URL+"/payments?"+query, paymentBody("order-q1", 100))
		return tr.RoundTrip(req.WithContext(WithIdentity(WithOperationID(context.Background(), "op-q1"), "tenant-q")))
	}
	_, err := call("a=1&token=first")
	pastNextAttempt(clk, pendingErr(t, err).NextAttempt)
	resp, err := call("a=1&token=second")
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, []string{"a=1&token=first", "a=1&token=second"}, queries)
	sameKey(t, srv.requests())

	_, err = call("a=2&token=second")
	require.ErrorIs(t, err, ErrKeyReuse)
	require.NotContains(t, err.Error(), "second", "the error shows the URL as journaled")
	require.Len(t, queries, 2, "nothing sent")
}

// The secrets the requests of TestSecretsAtRest carry. Each is distinctive,
// so that finding it in the file cannot be chance.
const (
	secAuth   = "Bearer sk_live_AUTH7f3a9c"
	secCookie = "sid=COOKIE4e1d22"
	secCustom = "HDRSECRET_b7e0"   // in X-Api-Secret, made sensitive by Options
	secUser   = "uiUSER_c1a2"      // URL userinfo
	secPass   = "uiPASS_d3b4"      // URL userinfo
	secToken  = "QTOKEN_e5f6"      // in the query parameter "token"
	secPAN    = "4111111111111111" // the card number in the JSON body
	// Not secrets to idem, but sealed by encryption all the same.
	plainTrace = "TRACE_visible_9q" // X-Trace header
	plainMode  = "MODE_live_42"     // query parameter "mode"
)

// secretRequest is POST {base}/payments carrying every secret above.
func secretRequest(tb testing.TB, ctx context.Context, base, ref string) (*http.Request, string) {
	tb.Helper()
	u, err := url.Parse(base + "/payments?mode=" + plainMode + "&token=" + secToken)
	require.NoError(tb, err)
	u.User = url.UserPassword(secUser, secPass)
	body := fmt.Sprintf(`{"amount":4200,"currency":"eur","reference":%q,"card":{"number":%q,"exp":"12/29"}}`, ref, secPAN)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", secAuth)
	req.Header.Set("Cookie", secCookie)
	req.Header.Set("X-Api-Secret", secCustom)
	req.Header.Set("X-Trace", plainTrace)
	return req, body
}

// restoreSecrets is a PrepareResume that puts back what the journal never
// keeps. With query false it forgets the token.
func restoreSecrets(query bool) func(*http.Request) error {
	return func(r *http.Request) error {
		r.Header.Set("Authorization", secAuth)
		r.Header.Set("Cookie", secCookie)
		r.Header.Set("X-Api-Secret", secCustom)
		r.URL.User = url.UserPassword(secUser, secPass)
		if query {
			r.URL.RawQuery += "&token=" + secToken // it came last
		}
		return nil
	}
}

// arrival is what the server side of the wire got on one attempt.
type arrival struct {
	Query, Auth, Cookie, Custom, Key string
	User                             *url.Userinfo
}

// wireArrivals records every attempt's URL query and secrets on w.
func wireArrivals(w *wireLog) func() []arrival {
	var mu sync.Mutex
	var got []arrival
	w.intercept = func(r *http.Request, key string) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, arrival{Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"),
			Cookie: r.Header.Get("Cookie"), Custom: r.Header.Get("X-Api-Secret"), Key: key, User: r.URL.User})
		return nil, nil // send it
	}
	return func() []arrival {
		mu.Lock()
		defer mu.Unlock()
		return append([]arrival(nil), got...)
	}
}

func TestSecretsAtRest(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "encrypted"}[encrypted], func(t *testing.T) {
			t.Parallel()
			testSecretsAtRest(t, encrypted)
		})
	}
}

func testSecretsAtRest(t *testing.T, encrypted bool) {
	srv := startPayments(t, nil)
	wire := newWireLog(t)
	arrivals := wireArrivals(wire)
	var logs bytes.Buffer
	var logMu sync.Mutex
	opts := Options{MaxAttempts: 2, SensitiveHeaders: []string{"X-Api-Secret"},
		SensitiveQueryParams: []string{"token"},
		Logger:               slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if encrypted {
		opts.Journal.Encryption = &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": newKey32(t)}}
	}
	path := filepath.Join(t.TempDir(), "secrets.journal")
	j, err := boltjournal.Open(path, &opts.Journal)
	require.NoError(t, err)
	tr, clk := transportOn(t, j, opts, wire, time.Time{})

	// One operation settles; the other meets 503 twice and stays pending.
	req, _ := secretRequest(t, WithOperationID(context.Background(), "op-settled"), srv.URL, "ref-settled")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	drain(t, resp)
	srv.Script(testserver.Fault{Kind: testserver.FaultStatus}, testserver.Fault{Kind: testserver.FaultStatus})
	req, pendingBody := secretRequest(t, WithOperationID(context.Background(), "op-pending"), srv.URL, "ref-pending")
	_, err = tr.RoundTrip(req)
	pe := pendingErr(t, err)
	got := arrivals()
	require.Len(t, got, 3)
	require.Equal(t, "mode="+plainMode+"&token="+secToken, got[2].Query, "the live request keeps its whole URL")

	rec, err := j.Lookup("op-pending")
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/payments?mode="+plainMode, rec.URL)
	require.Equal(t, []string{"token"}, rec.DroppedQuery)
	require.Equal(t, []string{"Authorization", "Cookie", "X-Api-Secret"}, rec.Dropped)
	require.Equal(t, map[bool]string{false: "", true: "k1"}[encrypted], rec.EncryptionKeyID)
	require.Equal(t, pendingBody, string(rec.Body))
	require.NoError(t, j.Close())

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	secrets := []string{secAuth, "AUTH7f3a9c", secCookie, "COOKIE4e1d22", secCustom, secUser, secPass, secToken}
	requireAbsent(t, raw, "the journal", secrets...)
	if encrypted {
		requireAbsent(t, raw, "the encrypted journal", secPAN, plainTrace, plainMode, "ref-pending")
	} else {
		// The search can fail: what is not sealed is there to be found.
		for _, s := range []string{secPAN, plainTrace, plainMode} {
			require.True(t, bytes.Contains(raw, []byte(s)), "the plaintext journal should hold %q", s)
		}
	}

	// A restart. Without the token, Resume sends nothing and keeps it pending.
	j2, err := boltjournal.Open(path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })
	noToken := opts
	noToken.PrepareResume = restoreSecrets(false)
	tr2, clk2 := transportOn(t, j2, noToken, wire, clk.Now())
	pastNextAttempt(clk2, pe.NextAttempt)
	outs := resumeAll(t, tr2)
	require.Len(t, outs, 1)
	require.ErrorIs(t, outs[0].Err, ErrSensitiveQueryMissing)
	require.Len(t, arrivals(), 3, "nothing sent")
	rec, err = j2.Lookup("op-pending")
	require.NoError(t, err)
	require.Equal(t, StatePending, rec.State)

	// With every secret restored, the server gets the original request.
	full := opts
	full.PrepareResume = restoreSecrets(true)
	tr3, _ := transportOn(t, j2, full, wire, clk2.Now())
	outs = resumeAll(t, tr3)
	require.Len(t, outs, 1)
	require.NoError(t, outs[0].Err)
	require.Equal(t, http.StatusCreated, outs[0].Response.StatusCode)
	got = arrivals()
	require.Len(t, got, 4)
	last := got[3]
	require.Equal(t, arrival{Query: "mode=" + plainMode + "&token=" + secToken, Auth: secAuth, Cookie: secCookie,
		Custom: secCustom, Key: pe.Key, User: url.UserPassword(secUser, secPass)}, last)
	sent := wire.sent()
	require.Equal(t, pendingBody, string(sent[len(sent)-1].Body), "byte for byte")
	require.NoError(t, srv.Ledger().Check([]string{"ref-settled", "ref-pending"}))
	require.Equal(t, 2, srv.Ledger().Payments())

	// Settling wrote again; still nothing to find, and nothing in the logs.
	require.NoError(t, j2.Close())
	raw, err = os.ReadFile(path)
	require.NoError(t, err)
	requireAbsent(t, raw, "the journal after resume", secrets...)
	if encrypted {
		requireAbsent(t, raw, "the encrypted journal after resume", secPAN, plainTrace, plainMode)
	}
	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logs.String(), "idem: resume outcome", "the logs were written")
	requireAbsent(t, logs.Bytes(), "the logs", secrets...)
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// storedHeader keeps every value but the sensitive ones and the key, in a
// copy of its own.
func TestStoredHeader(t *testing.T) {
	tr, err := NewTransport(nil, &Options{SensitiveHeaders: []string{"X-Api-Token"}})
	require.NoError(t, err)
	in := http.Header{
		"Content-Type":    {"application/json"},
		"Accept":          {"a", "b"},
		"accept":          {"c"}, // set through the map, not canonical
		"X-Empty":         {},
		"Authorization":   {"Bearer s3cret"},
		"X-Api-Token":     {"t0ken"},
		"Idempotency-Key": {"k"},
	}
	out := tr.storedHeader(in)
	require.Equal(t, []string{"application/json"}, out["Content-Type"])
	require.ElementsMatch(t, []string{"a", "b", "c"}, out["Accept"])
	require.Contains(t, out, "X-Empty")
	require.Nil(t, out["X-Empty"])
	require.Len(t, out, 3)

	out["Content-Type"][0] = "changed"
	out["Accept"] = append(out["Accept"], "d")
	require.Equal(t, "application/json", in["Content-Type"][0], "the caller's values must not be shared")
	require.Equal(t, []string{"a", "b"}, in["Accept"])
}
