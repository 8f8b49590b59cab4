package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestChaosShort is "idem chaos" cut down for CI: a few hundred payments
// through the mixed fault plan and a few SIGKILLs.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 2*time.Minute, "chaos", "-n", "300", "-concurrency", "32", "-kills", "5",
		"-kill-within", "800ms", "-seed", "7")
	require.NoError(t, err, out)
	require.Regexp(t, `payments to make\s+300\b`, out)
	require.Regexp(t, `SIGKILLs of the sending process\s+5\b`, out)
	require.Regexp(t, `charged, then the response was lost\s+[1-9]`, out)
	require.Regexp(t, `made twice or more \(charged again\)\s+0\b`, out)
	require.Regexp(t, `never made\s+0\b`, out)
	require.Contains(t, out, "300/300 payments made exactly once")
	t.Log(out)
}
