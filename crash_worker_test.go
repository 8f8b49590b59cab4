// The crash matrix's worker (crash_matrix_test.go): a child process that
// journals payments through a Transport whose test-only crash hook
// (crashpoint.go) SIGKILLs the process at one named crash point. It runs as
// helper mode "crash-worker" (process_test.go).

package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
)

// envCrashPoint names the crash point a crash worker dies at.
const envCrashPoint = "IDEM_CRASH_POINT"

// crashOps is the number of operations a crash worker runs: enough that a
// crash finds some of them done, some in flight and, in Resume, some not yet
// re-sent.
const crashOps = 4

// crashResumeAfter is how many operations a Resume pass re-sends before the
// worker dies at crashResume.
const crashResumeAfter = 2

// crashOptions are the worker's and the restarted parent's options: a short
// attempt timeout and short backoff, so the matrix runs in seconds.
func crashOptions() *Options {
	return &Options{
		AttemptTimeout:  300 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond,
		MaxInterval:     200 * time.Millisecond,
		MaxAttempts:     8,
	}
}

func crashOpID(i int) string { return fmt.Sprintf("crash/order-%d", i) }
func crashRef(i int) string  { return fmt.Sprintf("order-%d", i) }

// sendCrashOp runs operation i through rt and closes what it returns.
func sendCrashOp(rt http.RoundTripper, url string, i int) error {
	ctx := WithOperationID(context.Background(), crashOpID(i))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments",
		strings.NewReader(paymentBody(crashRef(i), 100+i)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// helperCrashWorker runs crashOps payments and dies at the crash point named
// by IDEM_CRASH_POINT. For crashResume it first leaves every operation pending
// without reaching the server (a base that fails to dial), then resumes them
// and dies after crashResumeAfter were re-sent. Returning at all means the
// crash point was never reached: a failure.
func helperCrashWorker() int {
	point, url := os.Getenv(envCrashPoint), os.Getenv(envURL)
	j, err := boltjournal.Open(os.Getenv(envJournal), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Close()
	tr, err := NewTransport(j, crashOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var resent atomic.Int32
	tr.crashAt = func(p string) {
		if p != point || p == crashResume && resent.Add(1) < crashResumeAfter {
			return
		}
		fmt.Printf("crashed=%s\n", p) // os.Stdout is unbuffered: the line is out before the kill
		if self, err := os.FindProcess(os.Getpid()); err == nil {
			self.Kill() // SIGKILL
		}
		time.Sleep(time.Minute) // SIGKILL cannot be caught; this only keeps the goroutine from going on
	}

	if point == crashResume {
		return crashInResume(j, tr, url)
	}
	var wg sync.WaitGroup
	for i := range crashOps {
		wg.Go(func() {
			if err := sendCrashOp(tr, url, i); err != nil {
				fmt.Fprintf(os.Stderr, "operation %d: %v\n", i, err)
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "crash worker: every operation returned; crash point %q never reached\n", point)
	return 4
}

// crashInResume journals every operation as pending without sending it, then
// resumes them one at a time through tr until tr's hook kills the process.
func crashInResume(j *boltjournal.Journal, tr *Transport, url string) int {
	opts := crashOptions()
	opts.MaxAttempts, opts.Base = 1, dialFailure{}
	offline, err := NewTransport(j, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	for i := range crashOps {
		var pe *PendingError
		if err := sendCrashOp(offline, url, i); !errors.As(err, &pe) {
			fmt.Fprintf(os.Stderr, "operation %d: want a *PendingError from the offline send, got %v\n", i, err)
			return 3
		}
	}
	tr.cfg.ResumeConcurrency = 1 // one at a time, so the crash leaves some never re-sent
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(2 * opts.InitialInterval) // the offline give-up's backoff
		if err := tr.Resume(context.Background(), nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	fmt.Fprintln(os.Stderr, "crash worker: Resume never re-sent enough operations to crash")
	return 4
}

// dialFailure is a base RoundTripper on which every dial fails: nothing
// reaches the server, so the operation stays pending.
type dialFailure struct{}

func (dialFailure) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}
