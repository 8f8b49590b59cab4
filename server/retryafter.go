// retryafter.go estimates, for a 409, when the holder of a key will be done: from the
// handler times recently observed on this instance for the same route, bounded by what
// is left of the holder's lease, in whole seconds (RFC 9110 section 10.2.3).

package server

import (
	"net/http"
	"sync"
	"time"
)

// maxRoutes bounds the routes whose handler times are kept; others share one estimate.
const maxRoutes = 256

// durations keeps a moving average of handler times per route. It is safe for concurrent
// use; its zero value is ready.
type durations struct {
	mu     sync.Mutex
	routes map[string]time.Duration
	all    time.Duration // routes past maxRoutes
}

// route names r's route: the ServeMux pattern that matched it, or its method and path.
func route(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.Method + " " + r.URL.Path
}

// observe notes that a handler for r's route took d.
func (ds *durations) observe(r *http.Request, d time.Duration) {
	k := route(r)
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.routes == nil {
		ds.routes = map[string]time.Duration{}
	}
	avg := func(old time.Duration) time.Duration {
		if old == 0 {
			return d
		}
		return old + (d-old)/8 // an exponentially weighted average over about 8 calls
	}
	if old, ok := ds.routes[k]; ok || len(ds.routes) < maxRoutes {
		ds.routes[k] = avg(old)
		return
	}
	ds.all = avg(ds.all)
}

// retryAfter is the Retry-After for a copy of r that found its key held with leaseLeft
// to run: the route's recent handler time (1 s when none was seen), no more than
// leaseLeft. writeProblem rounds it up to whole seconds, at least 1.
func (ds *durations) retryAfter(r *http.Request, leaseLeft time.Duration) time.Duration {
	ds.mu.Lock()
	est, ok := ds.routes[route(r)]
	if !ok {
		est = ds.all
	}
	ds.mu.Unlock()
	if est <= 0 {
		est = time.Second
	}
	return min(est, leaseLeft)
}
