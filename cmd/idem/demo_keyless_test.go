package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemoKeyless is "idem demo -keyless" cut down: against a provider that ignores keys,
// idem without a Reconciler charges payments twice; with one that looks each payment up
// by its reference, every payment is made once, through SIGKILLs and the faults.
func TestDemoKeyless(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 2*time.Minute, "demo", "-keyless", "-n", "200", "-concurrency", "16",
		"-kills", "3", "-kill-within", "600ms", "-seed", "3")
	require.NoError(t, err, out)
	require.Contains(t, out, "the server ignores keys: a payment that may have arrived is looked up by its reference")
	require.Regexp(t, `charged, then the response was lost\s+[1-9]`, out)
	require.Regexp(t, `200/200 payments made exactly once through 3 SIGKILLs and \d+ injected faults; idem, no Reconcile: [1-9]\d* charged twice or more`, out)
	t.Log(out)
}
