package idem

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Resume reads pending operations a page at a time; every one is sent once,
// across page boundaries, even while sends settle (and so move) records.
func TestResumePagesThroughManyPending(t *testing.T) {
	t.Parallel()
	const n = 2*resumePage + 17
	j := fastJournal(t)
	for i := range n {
		rec := pendingRecord(fmt.Sprintf("key-%d", i))
		rec.Created = time.Now()
		require.NoError(t, insertRec(j, rec, true))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get(DefaultKeyHeader)]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	// The records point at 127.0.0.1:80; send them to the test server.
	base := &rewriteHost{host: srv.Listener.Addr().String(), next: srv.Client().Transport}
	tr, _ := transportOn(t, j, Options{}, base, time.Time{})
	settled := 0
	require.NoError(t, tr.Resume(context.Background(), func(o Outcome) {
		require.NoError(t, o.Err)
		o.Response.Body.Close()
		settled++
	}))
	require.Equal(t, n, settled)
	require.Len(t, seen, n)
	for k, c := range seen {
		require.Equal(t, 1, c, "key %s sent %d times", k, c)
	}
	left, err := pendingCount(j)
	require.NoError(t, err)
	require.Zero(t, left)
}

// rewriteHost sends every request to host instead of its URL's host.
type rewriteHost struct {
	host string
	next http.RoundTripper
}

func (rh *rewriteHost) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = rh.host, ""
	return rh.next.RoundTrip(r)
}
