// Tests for one writer per journal file (journal.go): a second process that
// opens a held journal gets a clear error naming the path within the open
// timeout. Field scenario S20 (SCENARIOS.md, "Journal").

package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestS20_SecondProcessGetsJournalLocked(t *testing.T) {
	t.Parallel()
	_, path := testJournal(t) // this process holds it until the test ends
	for _, mode := range []string{"lock", "lock-ro"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			report, out := runHelper(t, mode, envJournal+"="+path, envOpenTimeout+"=500ms")
			require.Less(t, time.Since(start), 8*time.Second, "never a hang")
			took, err := time.ParseDuration(report["elapsed"])
			require.NoError(t, err, out)
			require.GreaterOrEqual(t, took, 400*time.Millisecond, "the child waits for the open timeout")
			require.Less(t, took, 3*time.Second, "and not much longer")
			require.Contains(t, report["err"], path, "the error names the path")
			require.Contains(t, report["err"], "locked")
		})
	}
}
