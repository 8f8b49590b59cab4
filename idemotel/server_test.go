// server_test.go checks ServerObserver against real traffic through the server middleware
// over loopback HTTP: its metrics add up to what a counting server.Observer saw, and each
// kind of event lands on its instrument with its attributes.

package idemotel_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem/idemotel"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// serverCounting is a server.Observer that counts what it is told.
type serverCounting struct {
	mu                                           sync.Mutex
	claims, replays, mismatches, leaseLost, errs int
	uncertain, resolved                          int
	conflicts                                    map[bool]int
	recoveries                                   map[string]int
	stored                                       []int
}

func (c *serverCounting) do(f func()) { c.mu.Lock(); defer c.mu.Unlock(); f() }

func (c *serverCounting) Claimed(*http.Request)                 { c.do(func() { c.claims++ }) }
func (c *serverCounting) Replayed(*http.Request, time.Duration) { c.do(func() { c.replays++ }) }
func (c *serverCounting) Conflict(_ *http.Request, stuck bool)  { c.do(func() { c.conflicts[stuck]++ }) }
func (c *serverCounting) Mismatch(*http.Request)                { c.do(func() { c.mismatches++ }) }
func (c *serverCounting) LeaseLost(*http.Request)               { c.do(func() { c.leaseLost++ }) }
func (c *serverCounting) Recovered(_ *http.Request, rec server.Recovery) {
	c.do(func() { c.recoveries[rec.String()]++ })
}
func (c *serverCounting) Stored(_ *http.Request, n int) {
	c.do(func() { c.stored = append(c.stored, n) })
}
func (c *serverCounting) StoreError(*http.Request, error) { c.do(func() { c.errs++ }) }
func (c *serverCounting) StoreUncertain(*http.Request, string, error) {
	c.do(func() { c.uncertain++ })
}
func (c *serverCounting) StoreResolved(*http.Request, string, string) {
	c.do(func() { c.resolved++ })
}

// serverTee reports every event to both observers.
type serverTee struct{ a, b server.Observer }

func (t serverTee) Claimed(r *http.Request) { t.a.Claimed(r); t.b.Claimed(r) }
func (t serverTee) Replayed(r *http.Request, d time.Duration) {
	t.a.Replayed(r, d)
	t.b.Replayed(r, d)
}
func (t serverTee) Conflict(r *http.Request, stuck bool) {
	t.a.Conflict(r, stuck)
	t.b.Conflict(r, stuck)
}
func (t serverTee) Mismatch(r *http.Request)  { t.a.Mismatch(r); t.b.Mismatch(r) }
func (t serverTee) LeaseLost(r *http.Request) { t.a.LeaseLost(r); t.b.LeaseLost(r) }
func (t serverTee) Recovered(r *http.Request, rec server.Recovery) {
	t.a.Recovered(r, rec)
	t.b.Recovered(r, rec)
}
func (t serverTee) Stored(r *http.Request, n int) { t.a.Stored(r, n); t.b.Stored(r, n) }
func (t serverTee) StoreError(r *http.Request, err error) {
	t.a.StoreError(r, err)
	t.b.StoreError(r, err)
}
func (t serverTee) StoreUncertain(r *http.Request, call string, err error) {
	t.a.StoreUncertain(r, call, err)
	t.b.StoreUncertain(r, call, err)
}
func (t serverTee) StoreResolved(r *http.Request, call, how string) {
	t.a.StoreResolved(r, call, how)
	t.b.StoreResolved(r, call, how)
}

// fakeClock is the memstore's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// downStore is a memstore whose Claim fails while down is set.
type downStore struct {
	*memstore.Store
	down atomic.Bool
}

func (s *downStore) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	if s.down.Load() {
		return server.Claim{}, errors.New("store down")
	}
	return s.Store.Claim(ctx, sc, token, fp, lease, ttl)
}

// collectMetrics reads every metric once, by name, keeping its unit too.
func collectMetrics(t *testing.T, r *sdkmetric.ManualReader) (map[string]metricdata.Aggregation, map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	data, units := map[string]metricdata.Aggregation{}, map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, idemotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			data[m.Name], units[m.Name] = m.Data, m.Unit
		}
	}
	return data, units
}

// histogram returns the count and sum of a histogram's points whose attributes include
// every one of want.
func histogram[N int64 | float64](t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) (uint64, N) {
	t.Helper()
	h, ok := data.(metricdata.Histogram[N])
	require.True(t, ok, "%T", data)
	var n uint64
	var s N
	for _, dp := range h.DataPoints {
		if hasAll(dp.Attributes, want) {
			n, s = n+dp.Count, s+dp.Sum
		}
	}
	return n, s
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Every event the middleware reports, made to happen over loopback HTTP: a claim and its
// stored answer, a replay, a 422, a 409 while the holder runs, a stuck record whose hook
// cannot tell yet (409, and the stalled holder's lease lost), then replays it, and a Store
// outage (503).
func TestServerAdapterRecordsWhatTheObserverSaw(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	adapter, err := idemotel.NewServer(mp)
	require.NoError(t, err)
	seen := &serverCounting{conflicts: map[bool]int{}, recoveries: map[string]int{}}

	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	store := &downStore{Store: memstore.New(&memstore.Options{Now: clk.Now})}
	var recoverCalls atomic.Int32
	const answer = `{"id":"pay_1"}`
	mw, err := server.New(&server.Options{
		Store: store,
		Lease: time.Hour, // its heartbeat (every 20 min) never runs: only the clock moves it
		Recover: func(context.Context, server.RecoverInfo) (server.Recovery, error) {
			if recoverCalls.Add(1) == 1 {
				return server.Recovery{}, nil // cannot tell yet
			}
			return server.Recovery{Response: &server.Response{Status: http.StatusCreated, Body: []byte(answer)}}, nil
		},
		Observer: serverTee{adapter, seen},
	})
	require.NoError(t, err)
	entered, unblock := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "block") {
			close(entered)
			<-unblock
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, answer)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(key, body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	require.Equal(t, http.StatusCreated, post("k1", `{"a":1}`))
	require.Equal(t, http.StatusCreated, post("k1", `{"a":1}`), "replay")
	require.Equal(t, http.StatusUnprocessableEntity, post("k1", `{"a":2}`))

	held := make(chan int, 1)
	go func() { held <- post("k2", `{"block":true}`) }()
	<-entered
	require.Equal(t, http.StatusConflict, post("k2", `{"block":true}`), "in progress")
	clk.Advance(2 * time.Hour) // the holder's lease lapsed: stuck
	require.Equal(t, http.StatusConflict, post("k2", `{"block":true}`), "stuck, the hook undecided")
	close(unblock)
	require.Equal(t, http.StatusCreated, <-held, "the stalled holder's client still gets its answer")
	clk.Advance(2 * time.Hour) // the undecided copy's lease lapsed in its turn
	require.Equal(t, http.StatusCreated, post("k2", `{"block":true}`), "recovered: replayed")

	store.down.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, post("k3", `{"a":3}`))

	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Equal(t, 2, seen.claims)
	require.Equal(t, 2, seen.replays)
	require.Equal(t, map[bool]int{false: 1, true: 1}, seen.conflicts)
	require.Equal(t, 1, seen.mismatches)
	require.Equal(t, 1, seen.leaseLost)
	require.Equal(t, map[string]int{"undecided": 1, "replay 201": 1}, seen.recoveries)
	require.Equal(t, []int{len(answer)}, seen.stored)
	require.Equal(t, 1, seen.errs)

	m, units := collectMetrics(t, reader)
	onRoute := []attribute.KeyValue{attribute.String("http.request.method", "POST"), attribute.String("http.route", "/payments")}
	require.EqualValues(t, seen.claims, sum(t, m["idem.server.claims"], onRoute...))
	require.EqualValues(t, seen.replays, sum(t, m["idem.server.replays"], onRoute...))
	n, secs := histogram[float64](t, m["idem.server.replay.duration"], onRoute...)
	require.EqualValues(t, seen.replays, n)
	require.Greater(t, secs, 0.0)
	require.Less(t, secs, 10.0, "seconds, not nanoseconds")
	require.EqualValues(t, seen.conflicts[false], sum(t, m["idem.server.conflicts"], attribute.Bool("idem.stuck", false)))
	require.EqualValues(t, seen.conflicts[true], sum(t, m["idem.server.conflicts"], attribute.Bool("idem.stuck", true)))
	require.EqualValues(t, seen.mismatches, sum(t, m["idem.server.mismatches"], onRoute...))
	require.EqualValues(t, seen.leaseLost, sum(t, m["idem.server.lease.losses"], onRoute...))
	require.EqualValues(t, 1, sum(t, m["idem.server.recoveries"], attribute.String("idem.decision", "undecided")))
	require.EqualValues(t, 1, sum(t, m["idem.server.recoveries"], attribute.String("idem.decision", "replay")))
	n, bytes := histogram[int64](t, m["idem.server.stored.size"], onRoute...)
	require.EqualValues(t, len(seen.stored), n)
	require.EqualValues(t, len(answer), bytes)
	require.EqualValues(t, seen.errs, sum(t, m["idem.server.store.errors"], onRoute...))

	for name, unit := range map[string]string{
		"idem.server.claims": "{request}", "idem.server.replays": "{request}",
		"idem.server.replay.duration": "s", "idem.server.conflicts": "{request}",
		"idem.server.mismatches": "{request}", "idem.server.lease.losses": "{lease}",
		"idem.server.recoveries": "{record}", "idem.server.stored.size": "By",
		"idem.server.store.errors": "{error}",
	} {
		require.Equal(t, unit, units[name], name)
	}
}

// Outside a ServeMux route (the middleware wraps the whole mux), there is no http.route.
func TestServerAdapterWithoutRoute(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	adapter, err := idemotel.NewServer(mp)
	require.NoError(t, err)
	for _, pattern := range []string{"", "POST example.com/payments/{id}"} {
		r := httptest.NewRequest(http.MethodPatch, "/payments/7", nil)
		r.Pattern = pattern
		adapter.Claimed(r)
	}
	m, _ := collectMetrics(t, reader)
	s, ok := m["idem.server.claims"].(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, s.DataPoints, 2)
	routes := map[string]int64{}
	for _, dp := range s.DataPoints {
		method, _ := dp.Attributes.Value("http.request.method")
		require.Equal(t, "PATCH", method.AsString())
		route, _ := dp.Attributes.Value("http.route")
		routes[route.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"": 1, "/payments/{id}": 1}, routes)
}

func TestNewServerWithGlobalProvider(t *testing.T) {
	o, err := idemotel.NewServer(nil)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	o.Claimed(r) // the global no-op provider: must not panic
	o.Recovered(r, server.Recovery{Rerun: true})
}
