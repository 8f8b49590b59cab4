// Tests for journal.go, the root's side of the bbolt journal, through the
// Transport and Open: no secret reaches the file, Open finds the journal held
// (in this process and in a second one, S20), prunes, keeps settled operations
// for KeyTTL, resumes journals written by an older idem exactly once
// (testdata/legacy), and rotates encryption keys. The engine's own tests are
// in journal/boltjournal.

package idem

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"

	"github.com/google/uuid"
)

func TestJournalKeepsNoSecrets(t *testing.T) {
	const (
		bearer    = "bearer-secret-7f3c1a"
		cookie    = "cookie-secret-2b9e44"
		apiSecret = "custom-secret-91d0e5"
		proxyAuth = "proxy-secret-c4aa17"
		user      = "userinfo-user-5e3a"
		pass      = "userinfo-pass-0d62"
	)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first call answers 201 (settled); every later call 503 (left
		// pending, so the record keeps its body and headers).
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)

	j, path := testJournal(t)
	tr, _ := transportOn(t, j, Options{MaxAttempts: 2, SensitiveHeaders: []string{"x-API-secret"}},
		srv.Client().Transport, time.Time{})
	client := &http.Client{Transport: tr}
	withUser := strings.Replace(srv.URL, "http://", "http://"+user+":"+pass+"@", 1)

	var keys []string
	for i, url := range []string{withUser, withUser, withUser} {
		// An operation ID keeps the settled record in the journal, to be read.
		ctx := WithOperationID(context.Background(), fmt.Sprintf("op-%d", i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		if i < 2 {
			req.Header.Set("Authorization", "Bearer "+bearer)
		} // else http.Client turns the userinfo into Basic credentials
		req.Header.Set("Cookie", "session="+cookie)
		req.Header["x-api-secret"] = []string{apiSecret} // not canonical on purpose
		req.Header.Set("Proxy-Authorization", "Basic "+proxyAuth)
		req.Header.Set("X-Request-Note", "kept")
		resp, err := client.Do(req)
		if i == 0 {
			require.NoError(t, err)
			resp.Body.Close()
			keys = append(keys, onlyRecordOf(t, j).Key)
			continue
		}
		perr := pendingErr(t, err)
		keys = append(keys, perr.Key)
	}

	require.NoError(t, j.Close())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	for _, secret := range []string{bearer, cookie, apiSecret, proxyAuth, user, pass, basic} {
		require.False(t, bytes.Contains(raw, []byte(secret)), "journal file holds %q", secret)
	}
	for _, key := range keys { // a minted key is stored as its 16 bytes
		id, err := uuid.Parse(key)
		require.NoError(t, err)
		require.True(t, bytes.Contains(raw, id[:]), "journal file lacks key %s", key)
	}
	require.True(t, bytes.Contains(raw, []byte("X-Request-Note")), "ordinary headers are journaled")
}

// Open over a journal this process holds fails at once, as boltjournal.Open does
// (boltjournal's TestJournalOpenTwiceInProcess has the other spellings).
func TestOpenJournalHeldInProcess(t *testing.T) {
	j, path := testJournal(t)
	opts := &Options{Journal: boltjournal.Options{OpenTimeout: 5 * time.Second}}
	start := time.Now()
	c, err := Open(path, opts)
	require.Nil(t, journalOf(c))
	require.ErrorIs(t, err, journal.ErrLocked)
	require.Contains(t, err.Error(), filepath.Base(path))
	require.Less(t, time.Since(start), time.Second, "journal.ErrLocked at once")
	_, err = j.Records()
	require.NoError(t, err)
}

func journalOf(c *Client) *boltjournal.Journal {
	if c == nil {
		return nil
	}
	return c.Journal()
}

func TestOpenPrunesOldRecords(t *testing.T) {
	j, path := testJournal(t)
	long := time.Now().Add(-30 * 24 * time.Hour)
	for _, st := range []State{StateSettled, StatePending} {
		rec := &Record{Key: "key-" + st.String(), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			State: st, Created: long, Updated: long}
		require.NoError(t, insertRec(j, rec, true))
	}
	require.NoError(t, j.Close())
	c, err := Open(path, &Options{Journal: boltjournal.Options{Retention: 24 * time.Hour}})
	require.NoError(t, err)
	defer c.Close()
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, StatePending, recs[0].State)
}

func TestRetentionBelowKeyTTLKeepsSettledOperation(t *testing.T) {
	t.Parallel()
	// Open prunes with Retention; raised to KeyTTL, it must keep a record
	// whose key the server still replays, or the operation ID would mint a
	// second key and charge twice.
	srv, wire := startPayments(t, nil), newWireLog(t)
	j, path := testJournal(t)
	tr, _ := transportOn(t, j, Options{}, wire, time.Now().Add(-time.Hour))
	ctx := WithOperationID(context.Background(), "op-r16")
	req, _ := paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	require.NoError(t, j.Close())

	c, err := Open(path, &Options{Journal: boltjournal.Options{Retention: time.Millisecond}, Base: wire})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rec, err := c.Journal().Lookup("op-r16")
	require.NoError(t, err)
	require.NotNil(t, rec, "pruned within KeyTTL")
	require.Equal(t, StateSettled, rec.State)

	req, _ = paymentRequest(t, ctx, srv.URL, "order-r16", 1600)
	resp, err = c.HTTPClient().Do(req)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	wire.requireOneKey(t, rec.Key)
	require.Equal(t, map[string]int{"order-r16": 1}, srv.Ledger().Effects)
}

func TestS20_SecondProcessGetsJournalLocked(t *testing.T) {
	t.Parallel()
	_, path := testJournal(t) // this process holds it until the test ends
	for _, mode := range []string{"lock", "lock-ro"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			report, out := runHelper(t, mode, envJournal+"="+path, envOpenTimeout+"=500ms")
			require.Less(t, time.Since(start), 8*time.Second, "never a hang")
			took, err := time.ParseDuration(report["elapsed"])
			require.NoError(t, err, out)
			require.GreaterOrEqual(t, took, 400*time.Millisecond, "the child waits for the open timeout")
			require.Less(t, took, 3*time.Second, "and not much longer")
			require.Contains(t, report["err"], path, "the error names the path")
			require.Contains(t, report["err"], "locked")
		})
	}
}

// helperLock opens the journal as a second writer would. It exits 0 if the
// open failed with journal.ErrLocked, and reports the error and the time the
// open took.
func helperLock() int {
	timeout, err := time.ParseDuration(os.Getenv(envOpenTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	j, err := boltjournal.Open(os.Getenv(envJournal), &boltjournal.Options{OpenTimeout: timeout})
	return reportLocked(j, err, time.Since(start))
}

// helperLockReadOnly is helperLock for a reader (idem journal ls).
func helperLockReadOnly() int {
	timeout, err := time.ParseDuration(os.Getenv(envOpenTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	j, err := boltjournal.OpenReadOnly(os.Getenv(envJournal), timeout)
	return reportLocked(j, err, time.Since(start))
}

func reportLocked(j *boltjournal.Journal, err error, took time.Duration) int {
	fmt.Printf("elapsed=%s\nerr=%v\n", took, err)
	switch {
	case err == nil:
		j.Close()
		return 3
	case !errors.Is(err, journal.ErrLocked):
		return 4
	}
	return 0
}

// openLegacy copies the gzipped fixture name to a temporary file.
func openLegacy(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "legacy", name))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "idem.journal")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(out, zr)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

// toAddr is a base that sends every request, whatever its host, to addr.
func toAddr(addr string) *http.Transport {
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

func legacyPay(ref string, pad int) string {
	return fmt.Sprintf(`{"amount":100,"currency":"EUR","reference":%q,"pad":%q}`, ref, strings.Repeat("x", pad))
}

func TestLegacyJournalResumedExactlyOnce(t *testing.T) {
	for _, fixture := range []string{"journal-5.gz", "journal-7.gz"} {
		t.Run(fixture, func(t *testing.T) {
			pay := startPayments(t, nil)
			base := toAddr(strings.TrimPrefix(pay.URL, "http://"))
			t.Cleanup(base.CloseIdleConnections)
			path := openLegacy(t, fixture)
			// The fixtures' operations are as old as the fixtures: a KeyTTL
			// of decades keeps them from expiring whatever today's date.
			opts := &Options{Base: base, KeyTTL: 50 * 365 * 24 * time.Hour, PrepareResume: func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer legacy-token")
				return nil
			}}
			if strings.Contains(fixture, "7") {
				opts.Journal.Encryption = &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": []byte(strings.Repeat("k", 32))}}
			}
			c, err := Open(path, opts)
			require.NoError(t, err)
			defer c.Close()
			recs, err := c.Journal().Records()
			require.NoError(t, err)
			require.Len(t, recs, 4)
			for _, r := range recs {
				require.Equal(t, StatePending, r.State, "%s", r.OperationID)
			}

			// The application calls its operation again, as after a
			// restart, with the same request (a refreshed token would be
			// refused only for a record bound to credentials).
			req, err := http.NewRequestWithContext(WithOperationID(context.Background(), "charge/op"),
				http.MethodPost, "http://legacy.test/payments", strings.NewReader(legacyPay("op", 0)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer legacy-token")
			resp, err := c.Transport().RoundTrip(req)
			require.NoError(t, err, "re-call of a legacy pending operation")
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)

			outs := resumeAll(t, c.Transport())
			require.Len(t, outs, 3)
			for _, o := range outs {
				require.NoError(t, o.Err, "%s", o.Record.OperationID)
				require.Equal(t, http.StatusCreated, o.Response.StatusCode)
			}
			led := pay.Ledger()
			for _, ref := range []string{"op", "key", "big", "plain"} {
				require.Equal(t, 1, led.Effects[ref], "effects of %s", ref)
			}

			// Called again (as Resume sent it, PrepareResume adding the
			// token): the server replays, one effect.
			req, err = http.NewRequestWithContext(WithOperationID(context.Background(), "charge/plain"),
				http.MethodPost, "http://legacy.test/payments", strings.NewReader(legacyPay("plain", 0)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer legacy-token")
			resp, err = c.Transport().RoundTrip(req)
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, 1, pay.Ledger().Effects["plain"])
		})
	}
}

// outcomesByOp moves tr's clock an hour on, so that every pending operation
// is due, resumes them and returns the outcomes by operation ID.
func outcomesByOp(t *testing.T, tr *Transport) map[string]Outcome {
	t.Helper()
	tr.clock.(*fakeClock).Advance(time.Hour)
	outs := map[string]Outcome{}
	for _, o := range resumeAll(t, tr) {
		outs[o.Record.OperationID] = o
	}
	return outs
}

func keyIDs(t *testing.T, j *boltjournal.Journal) map[string]string {
	t.Helper()
	recs, err := j.Records()
	require.NoError(t, err)
	ids := map[string]string{}
	for _, r := range recs {
		ids[r.OperationID] = r.EncryptionKeyID
	}
	return ids
}

func TestKeyRotation(t *testing.T) {
	f := newSealedFixture(t)
	ka, kb := newKey32(t), newKey32(t)
	onlyA := &boltjournal.Keyring{Current: "A", Keys: map[string][]byte{"A": ka}}
	rotated := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"A": ka, "B": kb}}
	onlyB := &boltjournal.Keyring{Current: "B", Keys: map[string][]byte{"B": kb}}

	j, tr := f.open(t, onlyA)
	bodyA := f.leavePending(t, tr, "rot-a")
	require.NoError(t, j.Close())

	// Rotated: new records use B, the old one still reads under A.
	j, tr = f.open(t, rotated)
	bodyB := f.leavePending(t, tr, "rot-b")
	require.Equal(t, map[string]string{"rot-a": "A", "rot-b": "B"}, keyIDs(t, j))
	rec, err := j.Lookup("rot-a")
	require.NoError(t, err)
	require.Equal(t, bodyA, string(rec.Body))
	require.Equal(t, "trace-rot-a", rec.Header.Get("X-Trace"))
	require.NoError(t, j.Close())

	// A removed while a record still needs it: that record is reported and
	// stays pending; the other one is sent.
	f.failing.Store(false)
	sentBefore := len(f.srv.requests())
	j, tr = f.open(t, onlyB)
	outs := outcomesByOp(t, tr)
	require.Len(t, outs, 2)
	require.ErrorIs(t, outs["rot-a"].Err, journal.ErrUnknownEncryptionKey)
	require.Contains(t, outs["rot-a"].Err.Error(), `"A"`, "the error names the key ID")
	require.Nil(t, outs["rot-a"].Response)
	require.NoError(t, outs["rot-b"].Err)
	require.Equal(t, http.StatusCreated, outs["rot-b"].Response.StatusCode)
	seen := f.srv.requests()
	require.Len(t, seen, sentBefore+1, "only rot-b was sent")
	require.Equal(t, bodyB, string(seen[len(seen)-1].Body))

	_, err = j.Lookup("rot-a")
	require.ErrorIs(t, err, journal.ErrUnknownEncryptionKey)
	recs, err := j.Records()
	require.NoError(t, err, "a listing shows what it cannot open")
	require.Len(t, recs, 2)
	require.Equal(t, "rot-a", recs[0].OperationID)
	require.Equal(t, StatePending, recs[0].State)
	require.True(t, recs[0].Sealed)
	require.Nil(t, recs[0].Body)
	require.Nil(t, recs[0].Header)
	require.False(t, recs[1].Sealed)

	// A new call with the operation ID sends nothing either.
	req := newRequest(t, http.MethodPost, f.srv.URL+"/payments", bodyA)
	_, err = tr.RoundTrip(req.WithContext(WithOperationID(context.Background(), "rot-a")))
	require.ErrorIs(t, err, journal.ErrUnknownEncryptionKey)
	require.Len(t, f.srv.requests(), sentBefore+1)
	require.NoError(t, j.Close())

	// No keyring at all: a Client is refused (its new records would be
	// plaintext); a journal opened without one takes no new record, and
	// Resume reports rot-a with the same typed error.
	_, err = Open(f.path, &Options{MaxAttempts: 1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	j, tr = f.open(t, nil)
	outs = outcomesByOp(t, tr)
	require.ErrorIs(t, outs["rot-a"].Err, journal.ErrUnknownEncryptionKey)
	_, err = tr.RoundTrip(newRequest(t, http.MethodPost, f.srv.URL+"/payments", paymentBody("plain", 1)))
	require.ErrorIs(t, err, ErrInvalidOptions, "no plaintext record in a sealed journal")
	require.Len(t, f.srv.requests(), sentBefore+1)
	require.NoError(t, j.Close())

	// A back: the operation was never dropped, and goes out as journaled.
	_, tr = f.open(t, rotated)
	outs = outcomesByOp(t, tr)
	require.Len(t, outs, 1)
	require.NoError(t, outs["rot-a"].Err)
	seen = f.srv.requests()
	require.Len(t, seen, sentBefore+2)
	require.Equal(t, bodyA, string(seen[len(seen)-1].Body))
	require.Equal(t, seen[0].Header.Get(DefaultKeyHeader), seen[len(seen)-1].Header.Get(DefaultKeyHeader),
		"the key of rot-a's first attempt")
	require.Equal(t, "trace-rot-a", seen[len(seen)-1].Header.Get("X-Trace"))
}

func TestEncryptionInvalidKeyring(t *testing.T) {
	good := newKey32(t)
	for _, tc := range []struct {
		name string
		kr   *boltjournal.Keyring
	}{
		{"no keys", &boltjournal.Keyring{Current: "k"}},
		{"current missing", &boltjournal.Keyring{Current: "x", Keys: map[string][]byte{"k": good}}},
		{"empty current", &boltjournal.Keyring{Keys: map[string][]byte{"k": good}}},
		{"empty key ID", &boltjournal.Keyring{Current: "", Keys: map[string][]byte{"": good}}},
		{"key ID with a space", &boltjournal.Keyring{Current: "k 1", Keys: map[string][]byte{"k 1": good}}},
		{"key too short", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": good[:16]}}},
		{"key too long", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": append(bytes.Clone(good), 0)}}},
		{"old key bad", &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": good, "old": {1, 2, 3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &Options{Journal: boltjournal.Options{Encryption: tc.kr}}
			path := filepath.Join(t.TempDir(), "bad.journal")
			_, err := boltjournal.Open(path, &opts.Journal)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.Contains(t, err.Error(), "Encryption")
			_, err = Open(path, opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, err = NewTransport(nil, opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, statErr := os.Stat(path)
			require.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

func TestKeyringCopiedWhenOpened(t *testing.T) {
	f := newSealedFixture(t)
	key := newKey32(t)
	kr := &boltjournal.Keyring{Current: "k", Keys: map[string][]byte{"k": key}}
	j, tr := f.open(t, kr)
	body := f.leavePending(t, tr, "c1")
	clear(key) // the caller wipes its copy
	kr.Current = "gone"
	rec, err := j.Lookup("c1")
	require.NoError(t, err)
	require.Equal(t, body, string(rec.Body))
}
