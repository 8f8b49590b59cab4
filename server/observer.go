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
	// StoreError: the Store failed for r and the middleware answered 503.
	StoreError(r *http.Request, err error)
	// StoreUncertain: a Store call for r (call is "claim", "complete", "release" or
	// "renew") ended with err and no answer, so it may have happened. Claims, completions
	// and releases are repeated with the same token until resolved (Resolved).
	StoreUncertain(r *http.Request, call string, err error)
	// StoreResolved: the middleware learned what became of an uncertain call for r, or
	// stopped trying: how is one of the Resolved... constants. It may come after r's
	// handler returned, from another goroutine.
	StoreResolved(r *http.Request, call, how string)
}

// How an uncertain Store call ended (Observer.StoreResolved).
const (
	ResolvedLanded   = "landed"   // a repeat succeeded (or found its own earlier success)
	ResolvedReleased = "released" // a claim whose handler never ran was released (or was gone)
	ResolvedFenced   = "fenced"   // the record is another holder's now, or done: nothing to do
	ResolvedGaveUp   = "gave-up"  // no answer before the lease (or the record) ran out: left to recovery
)

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

func (NopObserver) StoreUncertain(*http.Request, string, error) {}
func (NopObserver) StoreResolved(*http.Request, string, string) {}

var _ Observer = NopObserver{}
