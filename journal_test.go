// Tests for journal.go, the root's side of the bbolt journal, through the
// Transport and Open: no secret reaches the file, Open finds the journal
// held, and Open prunes. The engine's own tests are in journal/boltjournal.

package idem

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
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

// onlyRecordOf returns the single record in j.
func onlyRecordOf(tb testing.TB, j *boltjournal.Journal) *Record {
	tb.Helper()
	return onlyRecordIn(tb, j)
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
