// Tests for secrets at rest: real requests carrying every kind of secret go
// through a loopback testserver, and the journal file's raw bytes are
// searched for each of them, with and without Options.Journal.Encryption; then the
// pending operation is resumed with the secrets restored by PrepareResume.

package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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

// newKey32 returns a random AES-256 key.
func newKey32(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, boltjournal.KeySize)
	_, err := rand.Read(k)
	require.NoError(tb, err)
	return k
}

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

// requireAbsent asserts that none of secrets occurs in b.
func requireAbsent(tb testing.TB, b []byte, what string, secrets ...string) {
	tb.Helper()
	for _, s := range secrets {
		require.False(tb, bytes.Contains(b, []byte(s)), "%s holds %q", what, s)
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
