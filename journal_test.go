// Tests for journal.go: the file's mode and contents, damaged and foreign
// files, one opener at a time, pruning and listing.

package idem

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/testhook"
	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

func TestJournalFileMode(t *testing.T) {
	_, path := testJournal(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

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
	for _, key := range keys {
		require.True(t, bytes.Contains(raw, []byte(key)), "journal file lacks key %s", key)
	}
	require.True(t, bytes.Contains(raw, []byte("X-Request-Note")), "ordinary headers are journaled")
}

// onlyRecordOf returns the single record in j.
func onlyRecordOf(tb testing.TB, j *Journal) *Record {
	tb.Helper()
	recs, err := j.Records()
	require.NoError(tb, err)
	require.Len(tb, recs, 1)
	return recs[0]
}

func TestJournalPathIsDirectory(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	for _, open := range []func() error{
		func() error { _, err := OpenJournal(dir, nil); return err },
		func() error { _, err := OpenJournalReadOnly(dir, 0); return err },
	} {
		err := open()
		require.Error(t, err)
		require.Contains(t, err.Error(), dir)
		require.False(t, errors.Is(err, ErrJournalLocked), "%v", err)
	}
	// A writer gets the file system's own answer.
	_, err := OpenJournal(dir, nil)
	require.Contains(t, err.Error(), "is a directory")
	require.Less(t, time.Since(start), DefaultOpenTimeout, "no lock wait for a directory")
}

func TestJournalOpenTwiceInProcess(t *testing.T) {
	j, path := testJournal(t)
	rel, err := filepath.Rel(mustGetwd(t), path)
	require.NoError(t, err)
	// Generous timeouts: the answer must come at once, not after them.
	opts := &Options{Journal: JournalOptions{OpenTimeout: 5 * time.Second}}
	for name, open := range map[string]func() (*Journal, error){
		"same path": func() (*Journal, error) { return OpenJournal(path, &opts.Journal) },
		"another spelling": func() (*Journal, error) {
			return OpenJournal(filepath.Dir(path)+"/./"+filepath.Base(path), &opts.Journal)
		},
		"relative path":      func() (*Journal, error) { return OpenJournal(rel, &opts.Journal) },
		"Open":               func() (*Journal, error) { c, err := Open(path, opts); return journalOf(c), err },
		"read-only":          func() (*Journal, error) { return OpenJournalReadOnly(path, 5*time.Second) },
		"read-only relative": func() (*Journal, error) { return OpenJournalReadOnly(rel, 5*time.Second) },
	} {
		start := time.Now()
		j2, err := open()
		require.Nil(t, j2, name)
		require.ErrorIs(t, err, ErrJournalLocked, name)
		require.Contains(t, err.Error(), filepath.Base(path), name)
		require.Less(t, time.Since(start), time.Second, "%s: ErrJournalLocked at once", name)
	}
	// Through a symbolic link the in-process guard cannot tell, but the file
	// lock can: ErrJournalLocked after the open timeout, never a deadlock.
	link := filepath.Join(t.TempDir(), "link.journal")
	require.NoError(t, os.Symlink(path, link))
	start := time.Now()
	_, err = OpenJournal(link, &JournalOptions{OpenTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrJournalLocked)
	require.Contains(t, err.Error(), link)
	require.Less(t, time.Since(start), 2*time.Second)

	// The first handle still works, and once closed the path opens again.
	_, err = j.Records()
	require.NoError(t, err)
	require.NoError(t, j.Close())
	j2, err := OpenJournal(path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })
}

func journalOf(c *Client) *Journal {
	if c == nil {
		return nil
	}
	return c.Journal()
}

func mustGetwd(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	require.NoError(tb, err)
	return wd
}

func TestJournalDoubleCloseKeepsOtherHandlesClaim(t *testing.T) {
	j1, path := testJournal(t)
	require.NoError(t, j1.Close())
	j2, err := OpenJournal(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })

	j1.Close() // a stray second Close of the old handle
	start := time.Now()
	_, err = OpenJournal(path, &JournalOptions{OpenTimeout: 3 * time.Second})
	require.ErrorIs(t, err, ErrJournalLocked)
	require.Less(t, time.Since(start), time.Second, "the in-process guard must still know j2 holds the file")
	_, err = j2.Records()
	require.NoError(t, err)
}

func TestJournalReadOnlyWhileWriterHolds(t *testing.T) {
	j, path := testJournal(t)
	_, err := OpenJournalReadOnly(path, 100*time.Millisecond)
	require.ErrorIs(t, err, ErrJournalLocked)
	require.Contains(t, err.Error(), path)

	// Once the writer is gone, readers share the file, and cannot write.
	rec := &Record{Key: "k-ro", Method: http.MethodPost, URL: "http://127.0.0.1/p", State: StatePending,
		Created: time.Now(), Updated: time.Now()}
	require.NoError(t, insertRec(j, rec, true))
	require.NoError(t, j.Close())
	ro, err := OpenJournalReadOnly(path, 100*time.Millisecond)
	require.NoError(t, err)
	defer ro.Close()
	recs, err := ro.Records()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Error(t, insertRec(ro, &Record{Key: "k-ro-2", State: StatePending}, true))
}

func TestJournalPrune(t *testing.T) {
	j, _ := testJournal(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	setJournalNow(j, func() time.Time { return now })
	testhook.NoPeriodicPrune(j, now) // no periodic prune: this test prunes by hand
	const retention = 7 * 24 * time.Hour
	old, fresh := now.Add(-retention-time.Minute), now.Add(-retention+time.Minute)

	add := func(op string, state State, updated time.Time) *Record {
		rec := &Record{Key: "key-" + op, OperationID: op, Method: http.MethodPost, URL: "http://127.0.0.1/p",
			State: state, Created: updated.Add(-time.Hour), Updated: updated}
		require.NoError(t, insertRec(j, rec, true))
		return rec
	}
	doomed := []*Record{add("settled-old", StateSettled, old), add("failed-old", StateFailed, old), add("expired-old", StateExpired, old)}
	kept := []*Record{
		add("pending-ancient", StatePending, now.Add(-100*retention)),
		add("settled-fresh", StateSettled, fresh), add("failed-fresh", StateFailed, fresh),
		add("expired-fresh", StateExpired, fresh), add("pending-fresh", StatePending, fresh),
	}

	n, err := j.Prune(retention)
	require.NoError(t, err)
	require.Equal(t, len(doomed), n)
	for _, rec := range doomed {
		got, err := j.Lookup(rec.OperationID)
		require.NoError(t, err)
		require.Nil(t, got, rec.OperationID)
		got, err = j.Get(context.Background(), journal.Name{Key: rec.Key})
		require.NoError(t, err)
		require.Nil(t, got, "key index of %s", rec.OperationID)
	}
	for _, rec := range kept {
		got, err := j.Lookup(rec.OperationID)
		require.NoError(t, err)
		require.NotNil(t, got, rec.OperationID)
		require.Equal(t, rec.State, got.State)
	}
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, len(kept))

	// A pruned operation ID and key are free again.
	add("settled-old", StatePending, now)

	// Pending records survive any retention, however small.
	n, err = j.Prune(time.Nanosecond)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	recs, err = j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for _, rec := range recs {
		require.Equal(t, StatePending, rec.State)
	}
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
	c, err := Open(path, &Options{Journal: JournalOptions{Retention: 24 * time.Hour}})
	require.NoError(t, err)
	defer c.Close()
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, StatePending, recs[0].State)
}

func TestJournalRecordsPendingFirst(t *testing.T) {
	j, _ := testJournal(t)
	states := []State{StateSettled, StatePending, StateFailed, StateExpired, StatePending, StateSettled, StatePending}
	for i, st := range states {
		rec := &Record{Key: "key-" + string(rune('a'+i)), Method: http.MethodPost, URL: "http://127.0.0.1/p",
			State: st, Created: time.Now(), Updated: time.Now()}
		require.NoError(t, insertRec(j, rec, true))
	}
	recs, err := j.Records()
	require.NoError(t, err)
	var got []string
	for _, rec := range recs {
		got = append(got, rec.State.String()+":"+rec.Key)
	}
	require.Equal(t, []string{
		"pending:key-b", "pending:key-e", "pending:key-g",
		"settled:key-a", "failed:key-c", "expired:key-d", "settled:key-f",
	}, got)
}
