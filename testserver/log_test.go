// log_test.go pins the log lines "idem demo" parses (cmd/idem/demo_side.go): one per keyed
// POST /payments saying what the middleware decided, and one per fault before processing.

package testserver

import (
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The patterns of cmd/idem/demo_side.go, copied: a change here must be made there too.
var (
	demoServerLine = regexp.MustCompile(`^POST /payments key "([^"]*)" reference "([^"]*)": ([a-z ]+), (\S+)`)
	demoFaultLine  = regexp.MustCompile(`^POST /payments key "([^"]+)": (.*) before processing$`)
)

func TestLogLinesForDemo(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	s := newTestServer(t, &Options{Logf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}})
	s.Script(Fault{Kind: FaultStatus, Status: 503}, Fault{Kind: FaultHold, Delay: time.Minute})
	require.Equal(t, http.StatusServiceUnavailable, post(t, s, "k1", payBody("r1", 1)).status)
	var wg sync.WaitGroup
	req := postReq(t, s, `"k1"`, payBody("r1", 1)) // quoted: logged unquoted
	wg.Go(func() { _, _ = do(t, req, time.Minute) })
	waitHolding(t, s, 1)
	require.Equal(t, http.StatusConflict, post(t, s, "k1", payBody("r1", 1)).status)
	s.ReleaseHolds()
	wg.Wait()
	require.Equal(t, "true", post(t, s, "k1", payBody("r1", 1)).header.Get(replayedHeader))
	require.Equal(t, http.StatusUnprocessableEntity, post(t, s, "k1", payBody("r2", 1)).status)

	mu.Lock()
	defer mu.Unlock()
	var got [][]string
	for _, l := range lines {
		if m := demoFaultLine.FindStringSubmatch(l); m != nil {
			got = append(got, m[1:])
		} else if m := demoServerLine.FindStringSubmatch(l); m != nil {
			got = append(got, m[1:])
		}
	}
	require.Equal(t, [][]string{
		{"k1", "status 503"},
		{"k1", "r1", "new", "hold"},
		{"k1", "r1", "in progress", "none"},
		{"k1", "r1", "replay", "none"},
		{"k1", "r2", "fingerprint mismatch", "none"},
	}, got, "lines:\n%q", lines)
}
