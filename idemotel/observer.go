// Package idemotel records what idem reports to its Observers as
// OpenTelemetry metrics: the client's (idem.Observer, Observer below) and the
// server middleware's (server.Observer, ServerObserver in server.go, whose doc
// lists its instruments). It lives in its own module, so programs that use idem
// without OpenTelemetry never download it.
//
//	obs, err := idemotel.New(nil) // the global MeterProvider
//	if err != nil { ... }
//	c, err := idem.Open("payments.journal", &idem.Options{Observer: obs})
//
// The client's instruments, all under the meter "github.com/idem-go/idem/idemotel":
//
//	idem.attempts               counter {attempt}     http.request.method, idem.journaled, idem.resumed, idem.class, idem.status_class
//	idem.attempt.duration       histogram s           http.request.method, idem.journaled, idem.class
//	idem.retries                counter {retry}       http.request.method, idem.journaled, idem.class, idem.retry_after
//	idem.retry.wait             histogram s           idem.retry_after
//	idem.retries.denied         counter {retry}       http.request.method, idem.journaled, idem.resumed
//	idem.results                counter {operation}   idem.state, idem.status_class, idem.resumed, idem.not_sent
//	idem.pending                updowncounter {operation}
//	idem.write_ahead.duration   histogram s           idem.error
//
// idem.status_class is "2xx" to "5xx", or "none" when there was no response;
// full status codes and URLs are left out to bound cardinality. Resume's
// outcomes are idem.results with idem.resumed=true; expired operations are
// idem.results with idem.state="expired".
package idemotel

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-go/idem"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope (meter name) of the instruments.
const ScopeName = "github.com/idem-go/idem/idemotel"

// Observer is an idem.Observer that records OpenTelemetry metrics. It is
// safe for concurrent use, and one Observer may serve several idem Clients:
// their pending gauges add up.
type Observer struct {
	attempts   metric.Int64Counter
	attemptDur metric.Float64Histogram
	retries    metric.Int64Counter
	denied     metric.Int64Counter
	retryWait  metric.Float64Histogram
	results    metric.Int64Counter
	pending    metric.Int64UpDownCounter
	writeAhead metric.Float64Histogram
}

var _ idem.Observer = (*Observer)(nil)

// New creates the instruments on mp's meter. A nil mp means the global
// MeterProvider (otel.GetMeterProvider).
func New(mp metric.MeterProvider) (*Observer, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	o := &Observer{}
	var err error
	if o.attempts, err = m.Int64Counter("idem.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("HTTP round trips sent by idem, by how they were classified")); err != nil {
		return nil, wrap(err)
	}
	if o.attemptDur, err = m.Float64Histogram("idem.attempt.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from sending an attempt to its response headers or error")); err != nil {
		return nil, wrap(err)
	}
	if o.retries, err = m.Int64Counter("idem.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries decided, by the class of the attempt retried")); err != nil {
		return nil, wrap(err)
	}
	if o.denied, err = m.Int64Counter("idem.retries.denied", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries not made because the host's retry budget was empty")); err != nil {
		return nil, wrap(err)
	}
	if o.retryWait, err = m.Float64Histogram("idem.retry.wait", metric.WithUnit("s"),
		metric.WithDescription("Wait before a retry: backoff, or the server's Retry-After")); err != nil {
		return nil, wrap(err)
	}
	if o.results, err = m.Int64Counter("idem.results", metric.WithUnit("{operation}"),
		metric.WithDescription("Where calls and resumes left journaled operations")); err != nil {
		return nil, wrap(err)
	}
	if o.pending, err = m.Int64UpDownCounter("idem.pending", metric.WithUnit("{operation}"),
		metric.WithDescription("Operations pending in the journal: outcome not known yet")); err != nil {
		return nil, wrap(err)
	}
	if o.writeAhead, err = m.Float64Histogram("idem.write_ahead.duration", metric.WithUnit("s"),
		metric.WithDescription("Write-ahead commit (fsync included) before a journaled request is sent")); err != nil {
		return nil, wrap(err)
	}
	return o, nil
}

func wrap(err error) error { return fmt.Errorf("idemotel: creating instruments: %w", err) }

// Attempt implements idem.Observer.
func (o *Observer) Attempt(ctx context.Context, e idem.AttemptEvent) {
	o.attempts.Add(ctx, 1, metric.WithAttributes(
		attribute.String("http.request.method", e.Method),
		attribute.Bool("idem.journaled", e.Journaled),
		attribute.Bool("idem.resumed", e.Resumed),
		attribute.String("idem.class", e.Class.String()),
		attribute.String("idem.status_class", statusClass(e.Status))))
	o.attemptDur.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(
		attribute.String("http.request.method", e.Method),
		attribute.Bool("idem.journaled", e.Journaled),
		attribute.String("idem.class", e.Class.String())))
}

// Retry implements idem.Observer.
func (o *Observer) Retry(ctx context.Context, e idem.RetryEvent) {
	o.retries.Add(ctx, 1, metric.WithAttributes(
		attribute.String("http.request.method", e.Method),
		attribute.Bool("idem.journaled", e.Journaled),
		attribute.String("idem.class", e.Class.String()),
		attribute.Bool("idem.retry_after", e.RetryAfter)))
	o.retryWait.Record(ctx, e.Wait.Seconds(), metric.WithAttributes(
		attribute.Bool("idem.retry_after", e.RetryAfter)))
}

// RetryDenied implements idem.Observer.
func (o *Observer) RetryDenied(ctx context.Context, e idem.RetryEvent) {
	o.denied.Add(ctx, 1, metric.WithAttributes(
		attribute.String("http.request.method", e.Method),
		attribute.Bool("idem.journaled", e.Journaled),
		attribute.Bool("idem.resumed", e.Resumed)))
}

// Result implements idem.Observer.
func (o *Observer) Result(ctx context.Context, e idem.ResultEvent) {
	o.results.Add(ctx, 1, metric.WithAttributes(
		attribute.String("idem.state", e.State.String()),
		attribute.String("idem.status_class", statusClass(e.Status)),
		attribute.Bool("idem.resumed", e.Resumed),
		attribute.Bool("idem.not_sent", e.NotSent)))
}

// PendingChanged implements idem.Observer.
func (o *Observer) PendingChanged(delta int) {
	o.pending.Add(context.Background(), int64(delta))
}

// WriteAhead implements idem.Observer.
func (o *Observer) WriteAhead(ctx context.Context, d time.Duration, err error) {
	o.writeAhead.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.Bool("idem.error", err != nil)))
}

// statusClass maps a status code to "1xx".."5xx", and 0 to "none".
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "none"
	}
	return fmt.Sprintf("%dxx", status/100)
}
