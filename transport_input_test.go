// Tests for what Transport.RoundTrip makes of each kind of input to a call
// (transport.go's checks, validate.go, key.go, context.go, body.go): each row
// gets its exact error, through RoundTrip and through the *http.Client face,
// and a loopback server and the journal prove that a refused input was neither
// sent nor written and that an accepted one went out once and settled. Bad
// Options are in options_check_test.go, bad journal paths in
// openjournal_path_test.go.

package idem

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

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
