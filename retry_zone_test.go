// Regression test from FuzzParseRetryAfter (seed rfc850-est, run with
// TZ=America/New_York): http.ParseTime reads the zone abbreviation of an RFC 850
// date in time.Local, so a Retry-After date meant five hours more on a machine
// in New York than in UTC. DESIGN "Waiting" says HTTP-dates are read as UTC.

package idem

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryAfterDateReadAsUTCWhateverLocal(t *testing.T) {
	if os.Getenv("IDEM_TZ_CHILD") == "" {
		// time.Local is set once per process: run this test again in a child
		// whose local zone knows EST and PST.
		cmd := exec.Command(os.Args[0], "-test.run=^TestRetryAfterDateReadAsUTCWhateverLocal$", "-test.count=1")
		race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0") // as helperCommand
		cmd.Env = append(os.Environ(), "IDEM_TZ_CHILD=1", "TZ=America/New_York", "GORACE="+race)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child with TZ=America/New_York:\n%s", out)
	}
	now := time.Date(2026, time.March, 2, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"Monday, 02-Mar-26 13:00:00 GMT",
		"Monday, 02-Mar-26 13:00:00 EST",
		"Monday, 02-Mar-26 13:00:00 PST",
		"Monday, 02-Mar-26 13:00:00 CET",
	} {
		d, ok := parseRetryAfter(v, now)
		require.True(t, ok, "%q (time.Local %v)", v, time.Local)
		require.Equal(t, time.Hour, d, "%q (time.Local %v)", v, time.Local)
	}
}
