// Tests for the zero Transport (transport_zero.go): usable as net/http's,
// with the default Options and no journal, from concurrent first calls.

package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Concurrent first calls on a zero Transport set it up once: a GET whose
// first attempt gets 503 is retried to its 200, a POST (which needs a
// journal) is refused with ErrNoJournal and never sent; Resume says there is
// no journal. Run with -race.
func TestZeroTransportConcurrentFirstCalls(t *testing.T) {
	t.Parallel()
	var gets, posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else if gets.Add(1); strings.HasPrefix(r.Header.Get(AttemptHeader), "attempt=1;") {
			reply(w, http.StatusServiceUnavailable) // each GET's first attempt
			return
		}
		reply(w, http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	tr := &Transport{clock: newFakeClock()} // zero but for the clock: no real waits
	const n = 16
	var wg sync.WaitGroup
	statuses := make([]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			method := http.MethodGet
			if i%2 == 1 {
				method = http.MethodPost
			}
			<-start
			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, "x"))
			errs[i] = err
			if resp != nil {
				statuses[i] = resp.StatusCode
				drain(t, resp)
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if i%2 == 1 {
			require.ErrorIs(t, errs[i], ErrNoJournal, "call %d", i)
			continue
		}
		require.NoError(t, errs[i], "call %d", i)
		require.Equal(t, http.StatusOK, statuses[i], "call %d: retried to its 200", i)
	}
	require.Zero(t, posts.Load(), "nothing that needs a journal was sent")
	require.EqualValues(t, n, gets.Load(), "each GET took two attempts")
	require.ErrorIs(t, tr.Resume(context.Background(), nil), ErrNoJournal)
	require.Equal(t, DefaultMaxAttempts, tr.cfg.MaxAttempts, "the default Options")
}

// The literal forms from net/http's habits work: a zero Transport value and
// one in an http.Client.
func TestZeroTransportInHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	resp, err := (&http.Client{Transport: &Transport{}}).Get(srv.URL)
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	var tr Transport
	resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	drain(t, resp)
	_, err = (&http.Client{Transport: &tr}).Post(srv.URL, "application/json", nil)
	require.ErrorIs(t, err, ErrNoJournal)
}
