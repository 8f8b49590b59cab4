// Child processes for tests that need a second process: a second opener of a
// journal (S20), a worker killed with SIGKILL (S19), a process whose journal
// file may not grow (S21). The test binary runs itself again (os.Args[0]) with
// -test.run=^TestHelperProcess$ and IDEM_HELPER=<mode>; TestHelperProcess then
// runs helperModes[mode] and exits with its status. To add a kind of child,
// add a mode to helperModes and start it with helperCommand.

package idem

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// helperEnv names the helper mode in a child's environment.
const helperEnv = "IDEM_HELPER"

// Environment a helper mode reads.
const (
	envJournal     = "IDEM_JOURNAL"      // journal path
	envOpenTimeout = "IDEM_OPEN_TIMEOUT" // time.ParseDuration form
	envURL         = "IDEM_URL"          // testserver base URL
	envRef         = "IDEM_REF"          // payment reference
)

// helperModes maps a mode to the child's main function, which returns the
// exit status. Modes print "name=value" lines on stdout for the parent (see
// parseReport).
var helperModes = map[string]func() int{
	"lock":       helperLock,
	"lock-ro":    helperLockReadOnly,
	"s19-worker": helperS19Worker,
	"fsize-post": helperFsizePost,
	"crash":      helperCrashWorker,

	// journal_torture_test.go
	"torture-writer": helperTortureWriter,
}

// TestHelperProcess is the child's entry point. Without IDEM_HELPER it is an
// ordinary, empty test.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	run, ok := helperModes[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "idem test helper: unknown mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(run())
}

// helperCommand returns a command that runs mode in a child process with env
// ("NAME=value") added to this process's environment. ctx bounds the child:
// when it ends the child is killed.
func helperCommand(ctx context.Context, mode string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	// Under -race a child would otherwise linger a second at exit
	// (atexit_sleep_ms) waiting for reports no one will read.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "GORACE="+race), env...)
	cmd.WaitDelay = time.Second
	return cmd
}

// runHelper runs mode to completion, within 10 s, and returns its report and
// its combined output (for failure messages). A non-zero exit fails the test.
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
	return parseReport(string(out)), all
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

// parseReport reads the "name=value" lines a helper printed.
func parseReport(out string) map[string]string {
	report := make(map[string]string)
	for line := range strings.Lines(out) {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			report[name] = value
		}
	}
	return report
}

// helperLock opens the journal as a second writer would. It exits 0 if the
// open failed with journal.ErrLocked, and reports the error and the time the
// open took.
func helperLock() int {
	timeout, err := time.ParseDuration(os.Getenv(envOpenTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	j, err := boltjournal.Open(os.Getenv(envJournal), &boltjournal.Options{OpenTimeout: timeout})
	return reportLocked(j, err, time.Since(start))
}

// helperLockReadOnly is helperLock for a reader (idem journal ls).
func helperLockReadOnly() int {
	timeout, err := time.ParseDuration(os.Getenv(envOpenTimeout))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	start := time.Now()
	j, err := boltjournal.OpenReadOnly(os.Getenv(envJournal), timeout)
	return reportLocked(j, err, time.Since(start))
}

func reportLocked(j *boltjournal.Journal, err error, took time.Duration) int {
	fmt.Printf("elapsed=%s\nerr=%v\n", took, err)
	switch {
	case err == nil:
		j.Close()
		return 3
	case !errors.Is(err, journal.ErrLocked):
		return 4
	}
	return 0
}

// helperS19Worker journals one payment and sends it; the parent kills it
// with SIGKILL before the (delayed) response arrives. Returning at all is a
// failure.
func helperS19Worker() int {
	c, err := Open(os.Getenv(envJournal), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	ref := os.Getenv(envRef)
	ctx := WithOperationID(context.Background(), "charge/"+ref)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(envURL)+"/payments",
		strings.NewReader(paymentBody(ref, 4827)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	resp, err := c.HTTPClient().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	fmt.Fprintf(os.Stderr, "worker was not killed: response %v, error %v\n", resp != nil, err)
	return 4
}

// helperFsizePost opens the journal, then forbids the file to grow
// (RLIMIT_FSIZE at its current size, as a full disk would) and sends a payment
// whose body needs new pages. It reports what RoundTrip returned and exits 0
// if that was an error and no response.
func helperFsizePost() int {
	path := os.Getenv(envJournal)
	j, err := boltjournal.Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Close()
	tr, err := NewTransport(j, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := limitFileSize(fi.Size()); errors.Is(err, errors.ErrUnsupported) {
		fmt.Println("unsupported=true")
		return 0
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	pad := strings.Repeat("x", 2<<20) // more than the room the file has: the journal grows it 1 MiB at a time
	body := fmt.Sprintf(`{"amount":1,"currency":"eur","reference":%q,"pad":%q}`, os.Getenv(envRef), pad)
	req, err := http.NewRequest(http.MethodPost, os.Getenv(envURL)+"/payments", strings.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	resp, err := tr.RoundTrip(req)
	fmt.Printf("response=%v\nerr=%v\n", resp != nil, err)
	if resp != nil {
		resp.Body.Close()
		return 4
	}
	if err == nil {
		return 4
	}
	return 0
}
