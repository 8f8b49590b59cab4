// This file holds the child's counters, read by the parent around each
// measured window through pathStats: allocations (runtime.MemStats) and CPU
// time (getrusage, harness.ProcessCPU), round trips to the stores (trips.go), all of
// them the server's alone.

package serverbench

import (
	"encoding/json"
	"net/http"
	"runtime"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

// pathStats answers the child's counters as JSON (childStats); with ?gc=1 it
// first runs a collection, so that a window does not pay for the garbage of
// the one before.
const pathStats = "/_stats"

// childStats are the child's counters so far.
type childStats struct {
	Mallocs    uint64        `json:"mallocs"`     // runtime.MemStats.Mallocs
	TotalAlloc uint64        `json:"total_alloc"` // bytes, runtime.MemStats.TotalAlloc
	CPU        time.Duration `json:"cpu"`         // user + system CPU time, nanoseconds
	Trips      uint64        `json:"trips"`       // round trips to Redis and PostgreSQL (trips.go)
}

// since returns the counters from b to s.
func (s childStats) since(b childStats) childStats {
	return childStats{s.Mallocs - b.Mallocs, s.TotalAlloc - b.TotalAlloc, s.CPU - b.CPU, s.Trips - b.Trips}
}

func serveStats(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := childStats{Mallocs: ms.Mallocs, TotalAlloc: ms.TotalAlloc, CPU: harness.ProcessCPU(), Trips: storeTrips.Load()}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}
