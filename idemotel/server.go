// server.go records what the server middleware (package server) reports to its Observer as
// OpenTelemetry metrics: ServerObserver. observer.go does the same for the client.

package idemotel

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/idem-go/idem/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ServerObserver is a server.Observer that records OpenTelemetry metrics, for
// server.Options.Observer:
//
//	obs, err := idemotel.NewServer(nil) // the global MeterProvider
//	if err != nil { ... }
//	mw, err := server.New(&server.Options{Store: store, Observer: obs})
//
// The instruments, under the meter ScopeName, each with the attributes http.request.method
// and, when the middleware runs inside a net/http ServeMux route, http.route (the route's
// path pattern, e.g. "/payments/{id}"; never the path itself, to bound cardinality):
//
//	idem.server.claims             counter {request}   keys claimed: the handler ran
//	idem.server.replays            counter {request}   stored answers replayed (duplicates caught)
//	idem.server.replay.duration    histogram s         replay latency, from the request's arrival
//	idem.server.conflicts          counter {request}   409s; idem.stuck: the holder's lease had lapsed
//	idem.server.mismatches         counter {request}   422s: a key reused with another request (key collisions)
//	idem.server.lease.losses       counter {lease}     handlers whose lease was taken over
//	idem.server.recoveries         counter {record}    Recover decisions; idem.decision: replay, rerun or undecided
//	idem.server.stored.size        histogram By        body bytes of each stored answer (0: not replayable)
//	idem.server.store.errors       counter {error}     Store failures answered 503
//	idem.server.store.uncertain    counter {call}      Store calls without an answer (they may have happened); idem.call
//	idem.server.store.resolved     counter {call}      how those ended; idem.call and idem.resolved (landed, released, fenced, gave-up)
//
// It is safe for concurrent use; one ServerObserver may serve several middlewares.
type ServerObserver struct {
	claims     metric.Int64Counter
	replays    metric.Int64Counter
	replayDur  metric.Float64Histogram
	conflicts  metric.Int64Counter
	mismatches metric.Int64Counter
	leaseLost  metric.Int64Counter
	recoveries metric.Int64Counter
	stored     metric.Int64Histogram
	storeErrs  metric.Int64Counter
	uncertain  metric.Int64Counter
	resolved   metric.Int64Counter
}

var _ server.Observer = (*ServerObserver)(nil)

// NewServer creates the server instruments on mp's meter. A nil mp means the global
// MeterProvider (otel.GetMeterProvider). It fails only if the provider refuses an
// instrument.
func NewServer(mp metric.MeterProvider) (*ServerObserver, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	o := &ServerObserver{}
	var err error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		if err == nil {
			*dst, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		}
	}
	counter(&o.claims, "idem.server.claims", "{request}",
		"Requests that claimed their idempotency key: the handler ran")
	counter(&o.replays, "idem.server.replays", "{request}",
		"Requests answered with a stored response: duplicates caught")
	counter(&o.conflicts, "idem.server.conflicts", "{request}",
		"Requests answered 409: their key was in progress, or stuck after its holder's lease lapsed")
	counter(&o.mismatches, "idem.server.mismatches", "{request}",
		"Requests answered 422: their key was used before with another request")
	counter(&o.leaseLost, "idem.server.lease.losses", "{lease}",
		"Handlers whose lease was taken over: their answer was not stored")
	counter(&o.recoveries, "idem.server.recoveries", "{record}",
		"Decisions of the Recover hook about records stuck in progress")
	counter(&o.storeErrs, "idem.server.store.errors", "{error}",
		"Failures of the idempotency Store answered 503")
	counter(&o.uncertain, "idem.server.store.uncertain", "{call}",
		"Store calls that got no answer, so may have happened; they are repeated with the same token")
	counter(&o.resolved, "idem.server.store.resolved", "{call}",
		"How Store calls without an answer ended: landed, released, fenced or gave-up")
	if err == nil {
		o.replayDur, err = m.Float64Histogram("idem.server.replay.duration", metric.WithUnit("s"),
			metric.WithDescription("Time from a request's arrival to its replayed answer"))
	}
	if err == nil {
		o.stored, err = m.Int64Histogram("idem.server.stored.size", metric.WithUnit("By"),
			metric.WithDescription("Body size of each response stored for replay"))
	}
	if err != nil {
		return nil, wrap(err)
	}
	return o, nil
}

// Claimed implements server.Observer.
func (o *ServerObserver) Claimed(r *http.Request) {
	o.claims.Add(r.Context(), 1, requestAttrs(r))
}

// Replayed implements server.Observer.
func (o *ServerObserver) Replayed(r *http.Request, latency time.Duration) {
	attrs := requestAttrs(r)
	o.replays.Add(r.Context(), 1, attrs)
	o.replayDur.Record(r.Context(), latency.Seconds(), attrs)
}

// Conflict implements server.Observer.
func (o *ServerObserver) Conflict(r *http.Request, stuck bool) {
	o.conflicts.Add(r.Context(), 1, requestAttrs(r, attribute.Bool("idem.stuck", stuck)))
}

// Mismatch implements server.Observer.
func (o *ServerObserver) Mismatch(r *http.Request) {
	o.mismatches.Add(r.Context(), 1, requestAttrs(r))
}

// LeaseLost implements server.Observer. The middleware may call it after the request
// ended, so the request's context is not used.
func (o *ServerObserver) LeaseLost(r *http.Request) {
	o.leaseLost.Add(context.WithoutCancel(r.Context()), 1, requestAttrs(r))
}

// Recovered implements server.Observer.
func (o *ServerObserver) Recovered(r *http.Request, rec server.Recovery) {
	o.recoveries.Add(r.Context(), 1, requestAttrs(r, attribute.String("idem.decision", decision(rec))))
}

// Stored implements server.Observer.
func (o *ServerObserver) Stored(r *http.Request, bytes int) {
	o.stored.Record(context.WithoutCancel(r.Context()), int64(bytes), requestAttrs(r))
}

// StoreError implements server.Observer.
func (o *ServerObserver) StoreError(r *http.Request, _ error) {
	o.storeErrs.Add(context.WithoutCancel(r.Context()), 1, requestAttrs(r))
}

// StoreUncertain implements server.Observer.
func (o *ServerObserver) StoreUncertain(r *http.Request, call string, _ error) {
	o.uncertain.Add(context.WithoutCancel(r.Context()), 1, requestAttrs(r, attribute.String("idem.call", call)))
}

// StoreResolved implements server.Observer. It may be called after the request ended.
func (o *ServerObserver) StoreResolved(r *http.Request, call, how string) {
	o.resolved.Add(context.WithoutCancel(r.Context()), 1,
		requestAttrs(r, attribute.String("idem.call", call), attribute.String("idem.resolved", how)))
}

// decision names what a Recover hook decided.
func decision(rec server.Recovery) string {
	switch {
	case rec.Response != nil:
		return "replay"
	case rec.Rerun:
		return "rerun"
	}
	return "undecided"
}

// requestAttrs returns r's method and, if a ServeMux routed it, its route's path pattern
// (r.Pattern without its method and host), plus extra.
func requestAttrs(r *http.Request, extra ...attribute.KeyValue) metric.MeasurementOption {
	attrs := append(make([]attribute.KeyValue, 0, 2+len(extra)), attribute.String("http.request.method", r.Method))
	if route := routeOf(r.Pattern); route != "" {
		attrs = append(attrs, attribute.String("http.route", route))
	}
	return metric.WithAttributes(append(attrs, extra...)...)
}

// routeOf returns the path of a ServeMux pattern "[METHOD ][HOST]/PATH", or "".
func routeOf(pattern string) string {
	if _, rest, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(rest, " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}
