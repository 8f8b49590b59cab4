package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/stretchr/testify/require"
)

func TestJournalLsFilters(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t) // order-1 settled, order-2 pending

	for _, tc := range []struct {
		args []string
		want []string // operation IDs, in order
	}{
		{[]string{"-state", "pending", path}, []string{"order-2/charge"}},
		{[]string{path, "-state", "settled"}, []string{"order-1/charge"}}, // flags after FILE
		{[]string{"-state", "pending,settled", path}, []string{"order-2/charge", "order-1/charge"}},
		{[]string{"-state", "expired", path}, nil},
		{[]string{"-op", "order-1/charge", path}, []string{"order-1/charge"}},
		{[]string{"-op", "order-*", path}, []string{"order-2/charge", "order-1/charge"}},
		{[]string{"-op", "order-3*", path}, nil},
		{[]string{"-older-than", "1h", path}, nil},
		{[]string{"-older-than", "1ns", path}, []string{"order-2/charge", "order-1/charge"}},
	} {
		out, err := runIdem(t, bin, 30*time.Second, append([]string{"journal", "ls"}, tc.args...)...)
		require.NoError(t, err, out)
		var got []string // operation IDs in the order listed
		for _, line := range strings.Split(out, "\n") {
			for _, op := range []string{"order-1/charge", "order-2/charge"} {
				if strings.Contains(line, op) {
					got = append(got, op)
				}
			}
		}
		require.Equal(t, tc.want, got, "ls %v:\n%s", tc.args, out)
		require.Contains(t, out, "record(s)")
	}

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", "-state", "done", path)
	require.Error(t, err)
	require.Contains(t, out, `unknown state "done"`)
}

func TestJournalLsJSON(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t)
	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", "--json", path)
	require.NoError(t, err, out)
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	require.Equal(t, "pending", lines[0]["state"])
	require.Equal(t, "order-2/charge", lines[0]["op"])
	require.Equal(t, "settled", lines[1]["state"])
	require.EqualValues(t, 201, lines[1]["status"])
	for _, l := range lines {
		require.NotEmpty(t, l["key"])
		require.NotContains(t, l, "body", "ls leaves bodies out")
	}
}

func TestJournalStats(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t)
	out, err := runIdem(t, bin, 30*time.Second, "journal", "stats", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "2: 1 pending, 1 settled, 0 expired, 0 failed")
	require.Contains(t, out, "oldest pending order-2/charge")
	require.Contains(t, out, "bytes")

	out, err = runIdem(t, bin, 30*time.Second, "journal", "stats", path, "-json")
	require.NoError(t, err, out)
	var s journalSummary
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Equal(t, 2, s.Total)
	require.Equal(t, map[string]int{"pending": 1, "settled": 1, "expired": 0, "failed": 0}, s.States)
	require.NotNil(t, s.OldestPending)
	require.Equal(t, "order-2/charge", s.OldestPending.OperationID)
	require.Positive(t, s.Bytes)
}

// credentialServer answers 503 to the first request and 201 to the others,
// and remembers the Authorization header of each.
type credentialServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newCredentialServer(t *testing.T) *credentialServer {
	s := &credentialServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		n := len(s.auths)
		s.mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *credentialServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// pendingWithCredentials leaves one operation pending whose request carried
// an Authorization header (never journaled), and waits until it is due.
func pendingWithCredentials(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "creds.journal")
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), "refund-7"),
		http.MethodPost, url, strings.NewReader(`{"amount":7}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer app-token")
	_, err = c.HTTPClient().Do(req)
	var pe *idem.PendingError
	require.ErrorAs(t, err, &pe)
	require.NoError(t, c.Close())
	time.Sleep(time.Until(pe.NextAttempt))
	return path
}

func TestJournalResumeWithHeaders(t *testing.T) {
	bin := idemBinary(t)
	srv := newCredentialServer(t)
	path := pendingWithCredentials(t, srv.URL)

	// Without the credential it was sent with, the operation is not sent.
	out, err := runIdem(t, bin, 30*time.Second, "journal", "resume", path)
	require.Error(t, err, out)
	require.Contains(t, out, "not sent")
	require.Contains(t, out, "Authorization")
	require.Contains(t, out, "1 operation(s) not settled")
	require.Len(t, srv.seen(), 1)

	out, err = runIdem(t, bin, 30*time.Second, "journal", "resume", path, "-H", "Authorization: Bearer operator-token")
	require.NoError(t, err, out)
	require.Contains(t, out, "settled")
	require.Contains(t, out, "201")
	require.Contains(t, out, "refund-7")
	require.NotContains(t, out, "operator-token", "header values are never printed")
	require.Equal(t, []string{"Bearer app-token", "Bearer operator-token"}, srv.seen())

	out, err = runIdem(t, bin, 30*time.Second, "journal", "ls", "-state", "pending", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "0 record(s)")

	// Nothing left: a second resume does nothing and succeeds.
	out, err = runIdem(t, bin, 30*time.Second, "journal", "resume", "-json", path)
	require.NoError(t, err, out)
	require.Empty(t, strings.TrimSpace(out))
}

func TestJournalResumeRefusesWhileHeld(t *testing.T) {
	bin := idemBinary(t)
	path := filepath.Join(t.TempDir(), "held.journal")
	c, err := idem.Open(path, nil)
	require.NoError(t, err)
	defer c.Close()

	start := time.Now()
	out, err := runIdem(t, bin, 30*time.Second, "journal", "resume", "-H", "Authorization: Bearer x", path)
	require.Error(t, err)
	require.Contains(t, out, "locked")
	require.Contains(t, out, "an application has it open")
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestJournalResumeBadHeaderFlag(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t)
	out, err := runIdem(t, bin, 30*time.Second, "journal", "resume", "-H", "no colon", path)
	require.Error(t, err)
	require.Contains(t, out, `want "Name: value"`)
}
