package idemotel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/idemotel"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// counting is an idem.Observer that counts what it is told, to compare with
// what the adapter recorded.
type counting struct {
	idem.NopObserver
	mu          sync.Mutex
	attempts    int
	retries     int
	denied      int
	settled     int
	pendingRes  int
	pending     int
	writeAheads int
}

func (c *counting) Attempt(context.Context, idem.AttemptEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
}

func (c *counting) Retry(context.Context, idem.RetryEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retries++
}

func (c *counting) RetryDenied(context.Context, idem.RetryEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.denied++
}

func (c *counting) PendingChanged(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending += d
}

func (c *counting) WriteAhead(context.Context, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeAheads++
}

func (c *counting) Result(_ context.Context, e idem.ResultEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.State {
	case idem.StateSettled:
		c.settled++
	case idem.StatePending:
		c.pendingRes++
	}
}

// tee reports every event to both observers.
type tee struct{ a, b idem.Observer }

func (t tee) Attempt(ctx context.Context, e idem.AttemptEvent) {
	t.a.Attempt(ctx, e)
	t.b.Attempt(ctx, e)
}
func (t tee) Retry(ctx context.Context, e idem.RetryEvent) { t.a.Retry(ctx, e); t.b.Retry(ctx, e) }
func (t tee) RetryDenied(ctx context.Context, e idem.RetryEvent) {
	t.a.RetryDenied(ctx, e)
	t.b.RetryDenied(ctx, e)
}
func (t tee) Result(ctx context.Context, e idem.ResultEvent) { t.a.Result(ctx, e); t.b.Result(ctx, e) }
func (t tee) PendingChanged(d int)                           { t.a.PendingChanged(d); t.b.PendingChanged(d) }
func (t tee) WriteAhead(ctx context.Context, d time.Duration, err error) {
	t.a.WriteAhead(ctx, d, err)
	t.b.WriteAhead(ctx, d, err)
}

// collect reads every metric once, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, idemotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds up an Int64 sum's points whose attributes include every one of
// want.
func sum(t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := data.(metricdata.Sum[int64])
	require.True(t, ok, "%T", data)
	var n int64
	for _, dp := range s.DataPoints {
		match := true
		for _, kv := range want {
			if v, ok := dp.Attributes.Value(kv.Key); !ok || v != kv.Value {
				match = false
			}
		}
		if match {
			n += dp.Value
		}
	}
	return n
}

func histCount(t *testing.T, data metricdata.Aggregation) uint64 {
	t.Helper()
	h, ok := data.(metricdata.Histogram[float64])
	require.True(t, ok, "%T", data)
	var n uint64
	for _, dp := range h.DataPoints {
		n += dp.Count
	}
	return n
}

// Real traffic through idem, with the adapter and a counting observer side
// by side: the metrics add up to what the observer saw.
func TestAdapterRecordsWhatTheObserverSaw(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	adapter, err := idemotel.New(mp)
	require.NoError(t, err)
	seen := &counting{}

	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch k := n.Add(1); {
		case k%5 == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case k%5 == 2:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()

	c, err := idem.Open(filepath.Join(t.TempDir(), "j"), &idem.Options{Base: srv.Client().Transport,
		Observer: tee{adapter, seen}, MaxAttempts: 2, InitialInterval: time.Millisecond,
		RetryBudget: idem.RetryBudget{Burst: 2}}) // so that some retries are denied
	require.NoError(t, err)
	var pending int
	for range 10 {
		resp, err := c.HTTPClient().Post(srv.URL, "application/json", strings.NewReader(`{"amount":1}`))
		var pe *idem.PendingError
		switch {
		case errors.As(err, &pe):
			pending++
		case err != nil:
			t.Fatal(err)
		default:
			resp.Body.Close()
		}
	}
	resp, err := c.HTTPClient().Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	// A host that fails everything: its bucket (Burst 2) empties and the
	// third call's retry is denied.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	for range 3 {
		_, err := c.HTTPClient().Post(down.URL, "application/json", strings.NewReader(`{"amount":2}`))
		require.ErrorAs(t, err, new(*idem.PendingError))
		pending++
	}

	m := collect(t, reader)
	require.EqualValues(t, seen.attempts, sum(t, m["idem.attempts"]))
	require.EqualValues(t, 1, sum(t, m["idem.attempts"], attribute.Bool("idem.journaled", false)))
	require.EqualValues(t, seen.attempts, histCount(t, m["idem.attempt.duration"]))
	require.EqualValues(t, seen.retries, sum(t, m["idem.retries"]))
	require.EqualValues(t, seen.retries, sum(t, m["idem.retries"], attribute.String("idem.class", "retry")))
	require.EqualValues(t, seen.retries, histCount(t, m["idem.retry.wait"]))
	require.EqualValues(t, seen.denied, sum(t, m["idem.retries.denied"]))
	require.Positive(t, seen.denied)
	require.EqualValues(t, seen.settled, sum(t, m["idem.results"], attribute.String("idem.state", "settled"),
		attribute.String("idem.status_class", "2xx")))
	require.EqualValues(t, seen.pendingRes, sum(t, m["idem.results"], attribute.String("idem.state", "pending")))
	require.EqualValues(t, pending, seen.pendingRes)
	require.EqualValues(t, seen.pending, sum(t, m["idem.pending"]))
	require.EqualValues(t, pending, sum(t, m["idem.pending"]))
	require.EqualValues(t, seen.writeAheads, histCount(t, m["idem.write_ahead.duration"]))
	require.EqualValues(t, 13, seen.writeAheads)
	require.Positive(t, seen.retries)

	// Closing the client takes its pending operations off the gauge.
	require.NoError(t, c.Close())
	require.Zero(t, sum(t, collect(t, reader)["idem.pending"]))
}

func TestNewWithGlobalProvider(t *testing.T) {
	o, err := idemotel.New(nil)
	require.NoError(t, err)
	o.PendingChanged(1) // the global no-op provider: must not panic
	o.Attempt(context.Background(), idem.AttemptEvent{Method: "POST", Status: 0})
}
