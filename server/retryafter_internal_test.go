// retryafter_internal_test.go: the estimate a 409's Retry-After is made from, in the package.

package server

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

// The estimate is the route's moving average of handler times (1 s before any), never more
// than the holder's lease left; routes past maxRoutes share one estimate.
func TestRetryAfterEstimate(t *testing.T) {
	var ds durations
	pay := httptest.NewRequest("POST", "/payments", nil)
	refund := httptest.NewRequest("POST", "/refunds", nil)
	if got := ds.retryAfter(pay, time.Minute); got != time.Second {
		t.Errorf("before any handler time: %v, want 1s", got)
	}
	for range 20 {
		ds.observe(pay, 200*time.Millisecond)
	}
	ds.observe(refund, 5*time.Second)
	if got := ds.retryAfter(pay, time.Minute); got != 200*time.Millisecond {
		t.Errorf("payments: %v, want 200ms (Retry-After: 1)", got)
	}
	if got := ds.retryAfter(refund, 2*time.Second); got != 2*time.Second {
		t.Errorf("refunds with 2 s of lease left: %v, want the lease's 2s", got)
	}
	if got := retryAfterSeconds(ds.retryAfter(pay, time.Minute)); got != 1 {
		t.Errorf("Retry-After for a 200 ms handler = %d, want 1", got)
	}
	for i := range 2 * maxRoutes {
		ds.observe(httptest.NewRequest("POST", fmt.Sprintf("/r/%d", i), nil), 3*time.Second)
	}
	if len(ds.routes) != maxRoutes {
		t.Errorf("%d routes kept, want at most %d", len(ds.routes), maxRoutes)
	}
	if got := ds.retryAfter(httptest.NewRequest("POST", "/never", nil), time.Minute); got != 3*time.Second {
		t.Errorf("an unknown route past the bound: %v, want the shared 3s", got)
	}
}
