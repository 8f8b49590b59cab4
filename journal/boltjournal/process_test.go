// Child processes for the tests that kill a writer with SIGKILL
// (stage_test.go) or open a journal as an unprivileged user
// (journal_test.go). TestMain runs the test binary as a child when
// IDEM_BOLT_HELPER names a mode: the parent starts os.Args[0] again with
// -test.run=^$ (no test) and the mode in its environment, and the child runs
// helperModes[mode] and exits with its status. To add a kind of child, add
// a mode to helperModes and start it with runHelper or runAndKill
// (internal/childtest, which starts and kills the child).

package boltjournal

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/childtest"
)

// helperEnv names the helper mode in a child's environment.
const helperEnv = "IDEM_BOLT_HELPER"

// Environment a helper mode reads.
const (
	envJournal = "IDEM_JOURNAL" // journal path
	envRun     = "IDEM_RUN"     // this child's number, for operation IDs
	envControl = "IDEM_CONTROL" // a journal the unprivileged child may read
)

// helperModes maps a mode to the child's main function, which returns the
// exit status. Modes print lines on stdout for the parent (see runAndKill).
var helperModes = map[string]func() int{
	"stage-writer":      helperStageWriter,
	"open-unprivileged": helperOpenUnprivileged,
}

// TestMain runs a helper mode instead of the tests when the environment
// names one.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		run, ok := helperModes[mode]
		if !ok {
			fmt.Fprintf(os.Stderr, "boltjournal test helper: unknown mode %q\n", mode)
			os.Exit(2)
		}
		os.Exit(run())
	}
	os.Exit(m.Run())
}

// runHelper runs mode to completion, within 10 s, and returns its report
// and its combined output (childtest.Run).
func runHelper(tb testing.TB, mode string, env ...string) (map[string]string, string) {
	tb.Helper()
	return childtest.Run(tb, "^$", append([]string{helperEnv + "=" + mode}, env...)...)
}

// runAndKill runs mode with env until it is ready, SIGKILLs it after life,
// and returns the operation IDs it reported written ahead
// (childtest.RunAndKill).
func runAndKill(tb testing.TB, run int, life time.Duration, mode string, env ...string) []string {
	tb.Helper()
	return childtest.RunAndKill(tb, run, life, "^$", append([]string{helperEnv + "=" + mode}, env...)...)
}
