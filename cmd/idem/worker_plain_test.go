// The demo's comparison cannot pass silently: its plain worker really charges
// a payment twice when a response is lost, where idem's worker, against the
// same scripted fault, charges it once.

package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestPlainWorkerChargesTwiceOnALostResponse(t *testing.T) {
	bin := idemBinary(t)
	for _, tc := range []struct {
		plain   bool
		effects int
	}{{true, 2}, {false, 1}} {
		srv := testserver.NewServer(&testserver.Options{RequireKey: true})
		t.Cleanup(srv.Close)
		srv.Script(testserver.Fault{Kind: testserver.FaultLostResponse})
		args := []string{workerCommand, "-url", srv.URL, "-journal", filepath.Join(t.TempDir(), "state"),
			"-n", "1", "-concurrency", "1"}
		if tc.plain {
			args = append(args, "-plain")
		}
		out, err := runIdem(t, bin, 30*time.Second, args...)
		require.NoError(t, err, out)
		require.Contains(t, out, "settled order-0000/charge 201")
		l := srv.Ledger()
		require.Equal(t, 1, l.Faults["lost"], "the lost response happened")
		require.Equal(t, tc.effects, l.Effects["order-0000"], "plain %v:\n%s", tc.plain, out)
	}
}
