// Crashes in a redirect chain: a worker process (helper mode
// "redirect-crash", process_test.go) sends payments through an http.Client
// over idem to a front that answers 307, and SIGKILLs itself at a point of
// the chain; this process then restarts as the worker would and proves from
// the server's ledger that each payment took effect exactly once.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

func init() { helperModes["redirect-crash"] = helperRedirectCrash }

// redirectCrashOps is how many payments the worker sends, one after the
// other: the crash finds the first in its chain and the others never sent.
const redirectCrashOps = 3

// crashHopWritten is the worker's point "the hop's request was written, its
// response not read": the second crashRequestWritten of the first payment.
const crashHopWritten = "hop-written"

func redirectCrashRef(i int) string { return fmt.Sprintf("redirect-order-%d", i) }

// sendRedirectCrashOp sends payment i through c to the front's 307.
func sendRedirectCrashOp(c *http.Client, url string, i int) error {
	ctx := WithOperationID(context.Background(), "redirect/"+redirectCrashRef(i))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/307/payments",
		strings.NewReader(paymentBody(redirectCrashRef(i), 100+i)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("payment %d: status %d", i, resp.StatusCode)
	}
	return nil
}

// helperRedirectCrash runs the payments and dies at IDEM_CRASH_POINT.
// Returning at all means the point was never reached: a failure.
func helperRedirectCrash() int {
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
	var written atomic.Int32
	tr.crashAt = func(p string) {
		hit := p == point
		if point == crashHopWritten {
			hit = p == crashRequestWritten && written.Add(1) == 2
		}
		if !hit {
			return
		}
		fmt.Printf("crashed=%s\n", point)
		if self, err := os.FindProcess(os.Getpid()); err == nil {
			self.Kill() // SIGKILL
		}
		time.Sleep(time.Minute)
	}
	c := &http.Client{Transport: tr}
	for i := range redirectCrashOps {
		if err := sendRedirectCrashOp(c, url, i); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	fmt.Fprintf(os.Stderr, "redirect crash worker: crash point %q never reached\n", point)
	return 4
}

// TestRedirectCrash: a SIGKILL anywhere in a 307 chain, after Resume and the
// application's own second try, leaves every payment made exactly once and
// every operation settled:
//
//   - response: the 307 arrived, nothing written for it (the record still
//     names the first URL; Resume meets the 307 again and follows it);
//   - redirected: the record moved to the Location, durably, and the 307
//     was not returned yet;
//   - hop: the Client's hop arrived, nothing sent for it;
//   - hop-written: the hop's request was written, its response not read.
func TestRedirectCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a child process per crash point")
	}
	for _, point := range []string{crashResponse, crashRedirected, crashHop, crashHopWritten} {
		t.Run(point, func(t *testing.T) {
			f := startFront(t, false)
			path := filepath.Join(t.TempDir(), "redirect.journal")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := helperCommand(ctx, "redirect-crash", envJournal+"="+path, envURL+"="+f.URL, envCrashPoint+"="+point)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var exitErr *exec.ExitError
			require.True(t, errors.As(err, &exitErr), "worker: %v\n%s", err, out.String())
			ws, _ := exitErr.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker ended by %v:\n%s", ws, out.String())
			require.Contains(t, out.String(), "crashed="+point)

			j, err := boltjournal.Open(path, nil)
			require.NoError(t, err)
			t.Cleanup(func() { j.Close() })
			recs, err := j.Records()
			require.NoError(t, err)
			require.Len(t, recs, 1, "only the first payment was written ahead")
			require.Equal(t, StatePending, recs[0].State)
			if point == crashResponse {
				require.Empty(t, recs[0].Location)
			} else {
				require.Equal(t, f.URL+"/payments", recs[0].Location, "the move was durable before the 307 was returned")
			}

			opts := crashOptions()
			opts.Base = f.base()
			tr, err := NewTransport(j, opts)
			require.NoError(t, err)
			for range 5 {
				require.NoError(t, tr.Resume(ctx, nil))
				if n, err := pendingCount(j); err == nil && n == 0 {
					break
				}
				time.Sleep(opts.MaxInterval)
			}
			// The application's next life sends its payments again, with
			// their operation IDs: the first one is replayed.
			c := &http.Client{Transport: tr}
			for i := range redirectCrashOps {
				require.NoError(t, sendRedirectCrashOp(c, f.URL, i))
			}
			ledger := f.pay.Ledger()
			for i := range redirectCrashOps {
				require.Equal(t, 1, ledger.Effects[redirectCrashRef(i)], "payment %d", i)
			}
			require.Empty(t, ledger.Duplicates())
			recs, err = j.Records()
			require.NoError(t, err)
			require.Len(t, recs, redirectCrashOps)
			for _, r := range recs {
				require.Equal(t, StateSettled, r.State, "%s", r.OperationID)
				require.Equal(t, http.StatusCreated, r.Status, "%s", r.OperationID)
			}
		})
	}
}
