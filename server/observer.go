// observer.go is the hook for metrics: the Observer interface and NopObserver. The
// OpenTelemetry adapter lives in the idemotel module.

package server

import (
	"net/http"
	"time"
)

// Observer is told what the middleware did with each covered request that carried a key.
// Methods are called on the request's goroutine (LeaseLost also from the heartbeat's) and
// must be safe for concurrent use and quick. Embed NopObserver to implement only some.
type Observer interface {
	// Claimed: r claimed its key and its handler runs.
	Claimed(r *http.Request)
	// Replayed: r got a stored response (or, for an answer that was not kept, the 422
	// saying so), latency after r arrived.
	Replayed(r *http.Request, latency time.Duration)
	// Conflict: r got 409, its key being in progress (stuck says the holder's lease lapsed).
	Conflict(r *http.Request, stuck bool)
	// Mismatch: r got 422, its key having been used with another fingerprint.
	Mismatch(r *http.Request)
	// LeaseLost: r's handler lost its lease (a renew or its completion was fenced).
	LeaseLost(r *http.Request)
	// Recovered: the Recover hook decided about r's stuck record.
	Recovered(r *http.Request, rec Recovery)
	// Stored: r's response was stored, with a body of bytes bytes (0 for not replayable).
	Stored(r *http.Request, bytes int)
	// StoreError: the Store failed for r (503, or a completion or release that failed).
	StoreError(r *http.Request, err error)
}

// NopObserver does nothing. It is safe for concurrent use.
type NopObserver struct{}

func (NopObserver) Claimed(*http.Request)                 {}
func (NopObserver) Replayed(*http.Request, time.Duration) {}
func (NopObserver) Conflict(*http.Request, bool)          {}
func (NopObserver) Mismatch(*http.Request)                {}
func (NopObserver) LeaseLost(*http.Request)               {}
func (NopObserver) Recovered(*http.Request, Recovery)     {}
func (NopObserver) Stored(*http.Request, int)             {}
func (NopObserver) StoreError(*http.Request, error)       {}

var _ Observer = NopObserver{}
