// Tests of calling again, by operation ID, an operation a 307 or 308 moved
// (redirect.go): the call goes where the server holds its key, the
// Location, with the credentials and query it needs, through a primary API
// that fails over to another region.

package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// failover is a primary payments API that, under maintenance, answers every
// POST 307 to a failover region: another server, with its own idempotency
// store (keys scoped by Authorization, as Stripe's are by account), named by
// regionHost ("127.0.0.1", or "localhost": another domain to net/http).
type failover struct {
	front           *httptest.Server
	primary, region *testserver.Server
	maintenance     atomic.Bool

	mu          sync.Mutex
	regionHits  []frontHit
	regionQuery []string // the raw query of each region hit
}

// startFailover starts one under maintenance; its Location is the region's
// URL under regionHost with path (a query included, if any).
func startFailover(tb testing.TB, regionHost, path string) *failover {
	tb.Helper()
	f := &failover{primary: startPayments(tb, nil), region: startPayments(tb, nil)}
	f.maintenance.Store(true)
	region := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.regionHits = append(f.regionHits, frontHit{Method: r.Method, Path: r.URL.Path, Host: r.Host,
			Keys: r.Header.Values(DefaultKeyHeader), Auth: r.Header.Get("Authorization")})
		f.regionQuery = append(f.regionQuery, r.URL.RawQuery)
		f.mu.Unlock()
		f.region.Handler().ServeHTTP(w, r)
	}))
	tb.Cleanup(region.Close)
	location := strings.Replace(region.URL, "127.0.0.1", regionHost, 1) + path
	f.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.maintenance.Load() {
			w.Header().Set("Location", location)
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		f.primary.Handler().ServeHTTP(w, r)
	}))
	tb.Cleanup(f.front.Close)
	return f
}

// effects is the payments made for ref, in the region and the primary.
func (f *failover) effects(ref string) (region, primary int) {
	return f.region.Ledger().Effects[ref], f.primary.Ledger().Effects[ref]
}

func (f *failover) hits() ([]frontHit, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.regionHits), slices.Clone(f.regionQuery)
}

// TestRedirectRecallGoesToLocation: the hop of a 307 reaches the failover
// region, which makes the payment and loses the response: the operation is
// pending at its Location, where the server holds its key. Once the
// maintenance ends, a call that names the operation again (its operation ID
// or caller's key, as the package docs invite after a *PendingError) sends
// it to the Location, as Resume does, and gets the region's replay. Before,
// the call went to the caller's URL, the primary, which never saw the key:
// two payments.
func TestRedirectRecallGoesToLocation(t *testing.T) {
	t.Parallel()
	for _, keying := range []string{"op", "header"} {
		t.Run(keying, func(t *testing.T) {
			f := startFailover(t, "127.0.0.1", "/payments")
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
			c := &http.Client{Transport: tr}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := c.Do(payment(t, f.front.URL+"/payments", "r", keying))
			pendingErr(t, err)
			rec := onlyRecordIn(t, tr.journal)
			require.Equal(t, StatePending, rec.State)
			require.True(t, strings.HasSuffix(rec.Location, "/payments"), rec.Location)

			f.maintenance.Store(false)
			clk.Advance(time.Minute) // past the backoff
			resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", keying))
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
			hits, _ := f.hits()
			require.Len(t, hits, 2)
			require.Equal(t, hits[0].Keys, hits[1].Keys)
			require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)
		})
	}
}

// TestRedirectRecallSettledGoesToLocation: the same with the chain
// completed, the operation settled in the region (201). Called again within
// KeyTTL, it is sent again so the caller gets the server's stored response:
// to the Location, where the region replays it. Before, it went to the
// primary: a second payment.
func TestRedirectRecallSettledGoesToLocation(t *testing.T) {
	f := startFailover(t, "127.0.0.1", "/payments")
	j := memStore(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, _ := transportOver(t, j, Options{}, base, time.Time{})
	c := &http.Client{Transport: tr}
	resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, StateSettled, onlyRecordIn(t, tr.journal).State)

	f.maintenance.Store(false)
	resp, err = c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
	require.NoError(t, err)
	drain(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	region, primary := f.effects("r")
	require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
}

// TestRedirectRecallCredentials: a call sent to its operation's Location
// carries the caller's Authorization only where net/http would carry it on
// the hop: on the same domain, not on another ("localhost" after
// "127.0.0.1"). The region scopes keys by Authorization, so either mistake
// would make a second payment, and the credential would reach a domain the
// hop kept it from.
func TestRedirectRecallCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host, auth string // the region's host; the Authorization it gets
	}{{"127.0.0.1", "Bearer secret-1"}, {"localhost", ""}} {
		t.Run(c.host, func(t *testing.T) {
			f := startFailover(t, c.host, "/payments")
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
			client := &http.Client{Transport: tr}
			call := func() (*http.Response, error) {
				req := payment(t, f.front.URL+"/payments", "r", "op")
				req.Header.Set("Authorization", "Bearer secret-1")
				return client.Do(req)
			}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := call()
			pendingErr(t, err)

			f.maintenance.Store(false)
			clk.Advance(time.Minute)
			resp, err := call()
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			hits, _ := f.hits()
			require.Len(t, hits, 2)
			for _, h := range hits {
				require.Equal(t, c.auth, h.Auth)
				require.True(t, strings.HasPrefix(h.Host, c.host+":"), h.Host)
			}
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
		})
	}
}

// TestRedirectRecallSensitiveQuery: the journal keeps no value of a
// SensitiveQueryParams parameter, the Location's included. A call sent to
// its operation's Location gives a parameter the Location names the
// caller's value, on the same domain; it adds none the Location does not
// name; and on another domain it sends nothing (ErrSensitiveQueryMissing,
// still pending) rather than hand the caller's token there.
func TestRedirectRecallSensitiveQuery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, host, path string
		query            string // the region's query on the call; "-" for nothing sent
	}{
		{"named", "127.0.0.1", "/payments?token=from-server&mode=live", "mode=live&token=from-caller"},
		{"not-named", "127.0.0.1", "/payments", ""},
		{"other-domain", "localhost", "/payments?token=from-server", "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startFailover(t, c.host, c.path)
			j := memStore(t)
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, clk := transportOver(t, j, Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}}, base, time.Time{})
			client := &http.Client{Transport: tr}
			call := func() (*http.Response, error) {
				return client.Do(payment(t, f.front.URL+"/payments?token=from-caller", "r", "op"))
			}
			f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
			_, err := call()
			pendingErr(t, err)
			rec := onlyRecordIn(t, tr.journal)
			require.NotContains(t, rec.Location, "from-")

			f.maintenance.Store(false)
			clk.Advance(time.Minute)
			resp, err := call()
			hits, query := f.hits()
			if c.query == "-" {
				require.ErrorIs(t, pendingErr(t, err), ErrSensitiveQueryMissing)
				require.Len(t, hits, 1)
				require.Equal(t, StatePending, onlyRecordIn(t, tr.journal).State)
				return
			}
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Len(t, hits, 2)
			require.Equal(t, c.query, query[1])
			region, primary := f.effects("r")
			require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
		})
	}
}

// TestRedirectHopGoesWhereRecordIs: the hop of a 307 and a call that names
// the operation agree: both go where the journal says the operation is. A
// 307 moves it to the primary; before the hop is sent, Resume follows the
// primary's own 307 to the region, which makes the payment and loses the
// response. The late hop then goes to the region, not to the Location it
// was built for, which now takes payments itself. And the hop of a 307
// answered to a settled operation sent again, pointing elsewhere than where
// it settled, is not sent: *AlreadySettledError.
func TestRedirectHopGoesWhereRecordIs(t *testing.T) {
	t.Parallel()
	t.Run("moved-on", func(t *testing.T) {
		f := startFailover(t, "127.0.0.1", "/payments")
		entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", f.front.URL+"/payments")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}))
		t.Cleanup(entry.Close)
		j := memStore(t)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr, clk := transportOver(t, j, Options{MaxAttempts: 1}, base, time.Time{})
		moved, err := tr.RoundTrip(payment(t, entry.URL+"/pay", "r", "op"))
		require.NoError(t, err)
		drain(t, moved)
		require.Equal(t, http.StatusTemporaryRedirect, moved.StatusCode)

		f.region.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		require.NoError(t, tr.Resume(context.Background(), func(o Outcome) { pendingErr(t, o.Err) }))
		require.Equal(t, 1, f.region.Ledger().Effects["r"])
		f.maintenance.Store(false)
		clk.Advance(time.Minute)

		hop := payment(t, f.front.URL+"/payments", "r", "op")
		hop.Response = moved
		resp, err := tr.RoundTrip(hop)
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		region, primary := f.effects("r")
		require.Equal(t, [2]int{1, 0}, [2]int{region, primary}, "payments in the region and the primary")
	})
	t.Run("settled-elsewhere", func(t *testing.T) {
		f := startFailover(t, "127.0.0.1", "/payments")
		f.maintenance.Store(false)
		j := memStore(t)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr, _ := transportOver(t, j, Options{}, base, time.Time{})
		c := &http.Client{Transport: tr}
		resp, err := c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
		require.NoError(t, err)
		drain(t, resp)
		require.Equal(t, http.StatusCreated, resp.StatusCode)

		f.maintenance.Store(true)
		_, err = c.Do(payment(t, f.front.URL+"/payments", "r", "op"))
		var settled *AlreadySettledError
		require.ErrorAs(t, err, &settled)
		require.Equal(t, http.StatusCreated, settled.Status)
		hits, _ := f.hits()
		require.Empty(t, hits)
		region, primary := f.effects("r")
		require.Equal(t, [2]int{0, 1}, [2]int{region, primary}, "payments in the region and the primary")
	})
}
