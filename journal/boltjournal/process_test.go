// Child processes for the tests that kill a writer with SIGKILL
// (stage_test.go) or open a journal as an unprivileged user
// (journal_test.go). TestMain runs the test binary as a child when
// IDEM_BOLT_HELPER names a mode: the parent starts os.Args[0] again with
// -test.run=^$ (no test) and the mode in its environment, and the child runs
// helperModes[mode] and exits with its status. To add a kind of child, add
// a mode to helperModes and start it with helperCommand.

package boltjournal

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// helperCommand returns a command that runs mode in a child process with env
// ("NAME=value") added to this process's environment. ctx bounds the child:
// when it ends the child is killed.
func helperCommand(ctx context.Context, mode string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.count=1")
	// Under -race a child would otherwise linger a second at exit
	// (atexit_sleep_ms) waiting for reports no one will read.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "GORACE="+race), env...)
	cmd.WaitDelay = time.Second
	return cmd
}

// runHelper runs mode to completion, within 10 s, and returns its report
// (the "name=value" lines it printed) and its combined output, for failure
// messages. A non-zero exit fails the test.
func runHelper(tb testing.TB, mode string, env ...string) (map[string]string, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := helperCommand(ctx, mode, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	all := string(out) + stderr.String()
	require.NoError(tb, ctx.Err(), "helper %s did not finish within 10 s:\n%s", mode, all)
	require.NoError(tb, err, "helper %s:\n%s", mode, all)
	report := make(map[string]string)
	for line := range strings.Lines(string(out)) {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			report[name] = value
		}
	}
	return report, all
}

// runAndKill starts a helper child in mode with env, lets it run for life
// once it prints "ready", kills it with SIGKILL, and returns the operation
// IDs it reported written ahead ("op=ID" lines). run names the child in
// failures.
func runAndKill(tb testing.TB, run int, life time.Duration, mode string, env ...string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperCommand(ctx, mode, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())

	ready := make(chan struct{})
	var ops []string
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready":
				close(ready)
			case strings.HasPrefix(line, "op="):
				ops = append(ops, strings.TrimPrefix(line, "op="))
			}
		}
	})
	select {
	case <-ready:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		wg.Wait()
		cmd.Wait()
		tb.Fatalf("run %d: the child was not ready within 15 s:\n%s", run, stderr.String())
	}
	time.Sleep(life)
	require.NoError(tb, cmd.Process.Signal(syscall.SIGKILL))
	wg.Wait() // the pipe ends once the child is dead
	err = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(tb, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"run %d: the child ended before the kill (%v):\n%s", run, err, stderr.String())
	return ops
}
