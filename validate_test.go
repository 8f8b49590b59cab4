// Tests for validate.go: what net/http would refuse is refused before the
// write-ahead, and the journaled URL (storedURL) keeps neither userinfo nor a
// fragment.

package idem

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"

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

// Review (issue 5, item 4), fixed: request inputs that net/http refuses
// before writing a byte (a control character or DEL in a header value, a
// port out of range) were journaled, "retried" in vain (classified ClassRetry:
// nothing was written), left pending and re-sent by every Resume until
// KeyTTL. validRequest now refuses them with ErrInvalidRequest before the
// write-ahead.
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

// Review (issue 5, item 3), fixed: a sensitive parameter in the URL's
// fragment. net/http never sends a fragment, yet storedURL journaled it
// verbatim, so "#access_token=..." (the OAuth implicit-flow shape) landed in
// a plaintext journal's bytes. The journaled URL now leaves the fragment
// out; Resume loses nothing.
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
