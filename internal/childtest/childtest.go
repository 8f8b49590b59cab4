// Package childtest runs a test binary again as a child process, for the
// tests that need a second process: a writer killed with SIGKILL mid-write,
// a second opener of a file, an instance of a fleet. The parent starts
// os.Args[0] with a -test.run pattern and a mode in the child's environment;
// the child's TestMain (or the one test the pattern selects) sees the mode
// and runs the child's code instead of the tests. A child reports to its
// parent in lines on stdout: "ready", "op=ID", "name=value".
package childtest

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

// Command returns a command that runs this test binary again with
// -test.run=run ("^$": no test, for a TestMain that runs the child) and env
// ("NAME=value") added to this process's environment. ctx bounds the child:
// when it ends the child is killed.
func Command(ctx context.Context, run string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.count=1")
	// Under -race a child would otherwise linger a second at exit
	// (atexit_sleep_ms) waiting for reports no one will read.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), "GORACE="+race), env...)
	cmd.WaitDelay = time.Second
	return cmd
}

// Run runs the child that run and env select to completion, within 10 s,
// and returns its report (the "name=value" lines it printed) and its
// combined output, for failure messages. A non-zero exit fails tb.
func Run(tb testing.TB, run string, env ...string) (map[string]string, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := Command(ctx, run, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	all := string(out) + stderr.String()
	require.NoError(tb, ctx.Err(), "child %v did not finish within 10 s:\n%s", env, all)
	require.NoError(tb, err, "child %v:\n%s", env, all)
	return ParseReport(string(out)), all
}

// ParseReport reads the "name=value" lines a child printed.
func ParseReport(out string) map[string]string {
	report := make(map[string]string)
	for line := range strings.Lines(out) {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			report[name] = value
		}
	}
	return report
}

// RunAndKill starts the child that run and env select, lets it run for
// life once it prints "ready", kills it (Kill), and returns the operation
// IDs it reported written ahead ("op=ID" lines). n names the child in
// failures.
func RunAndKill(tb testing.TB, n int, life time.Duration, run string, env ...string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := Command(ctx, run, env...)
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
		tb.Fatalf("run %d: the child was not ready within 15 s:\n%s", n, stderr.String())
	}
	time.Sleep(life)
	Kill(tb, cmd, &wg, fmt.Sprintf("run %d", n), stderr.String)
	return ops
}

// Kill kills cmd's process with SIGKILL, waits for reading its output to end
// (readers, nil for none) and for it, and fails tb unless SIGKILL is what
// ended it: a child that ended on its own before proves nothing about a
// crash. what names the child in a failure, followed by output().
func Kill(tb testing.TB, cmd *exec.Cmd, readers *sync.WaitGroup, what string, output func() string) {
	tb.Helper()
	require.NoError(tb, cmd.Process.Signal(syscall.SIGKILL))
	if readers != nil {
		readers.Wait() // a pipe ends once the child is dead
	}
	err := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(tb, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"%s: the child ended before the kill (%v):\n%s", what, err, output())
}
