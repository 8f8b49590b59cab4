// The crash matrix: for every crash point (crashpoint.go) and every fault kind
// of the testserver, a worker process (crash_worker_test.go) runs payments
// into the fault and SIGKILLs itself at the crash point; this process then
// restarts as the worker would: it reopens the journal, resumes until nothing
// is pending, sends again what was never written ahead, and proves from the
// server's ledger that every operation took effect exactly once.

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

// crashPoints are the rows of the matrix, in the order an operation meets them.
var crashPoints = []string{crashWriteAhead, crashRequestWritten, crashResponse, crashResume}

// crashFaults are the columns: every testserver fault kind, with delays set
// against crashOptions' 300 ms attempt timeout. The fault hits the first
// POST /payments the server sees: the worker's first attempt, or, for a crash
// before anything was sent, the first attempt Resume makes.
var crashFaults = []struct {
	name  string
	fault testserver.Fault
}{
	{"none", testserver.Fault{}},
	{"503", testserver.Fault{Kind: testserver.FaultStatus, Status: http.StatusServiceUnavailable, RetryAfter: "1"}},
	{"drop", testserver.Fault{Kind: testserver.FaultDropBefore}},
	{"lost", testserver.Fault{Kind: testserver.FaultLostResponse}},
	// Processed, then answered after the attempt timed out: the retry is a replay.
	{"slow", testserver.Fault{Kind: testserver.FaultSlowResponse, Delay: time.Second}},
	// Held past the attempt timeout: the retry meets 409 (Retry-After: 1).
	{"hold", testserver.Fault{Kind: testserver.FaultHold, Delay: 600 * time.Millisecond}},
	{"reset", testserver.Fault{Kind: testserver.FaultResetBody}},
}

// crashCellsAtOnce bounds the cells running at once. Cells mostly wait (on
// Retry-After, holds, timeouts), so more of them than -test.parallel allows
// run side by side; the subtests only check what each cell saw.
const crashCellsAtOnce = 8

// crashCell is what one cell of the matrix saw.
type crashCell struct {
	point, fault string
	err          error // the cell could not run (not a finding about idem)

	workerOut  string
	workerExit error
	afterCrash []*Record // the journal as the crash left it
	// unsentEffects are the effects, after Resume, of operations that have
	// no record: never written ahead, so never sent.
	unsentEffects map[string]int
	passes        int       // Resume passes until nothing was pending
	outcomes      []Outcome // from Resume, bodies closed
	reissued      int       // operations sent again because they were never written ahead
	final         []*Record // the journal reopened at the end
	ledger        testserver.Ledger
	took          time.Duration
}

func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process per cell")
	}
	t.Parallel()
	start := time.Now()
	dir := t.TempDir()
	// Every cell runs, even those a -run pattern leaves out: the subtests
	// only check what the cells saw.
	sem := make(chan struct{}, crashCellsAtOnce)
	cells := make(map[string]chan *crashCell)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait() // before TempDir's cleanup, however many subtests ran
		t.Logf("%d cells (%d crash points x %d faults) in %v", len(cells), len(crashPoints), len(crashFaults),
			time.Since(start).Round(time.Millisecond))
	}()
	for _, point := range crashPoints {
		for _, f := range crashFaults {
			done := make(chan *crashCell, 1)
			cells[point+"/"+f.name] = done
			cellDir := filepath.Join(dir, point+"-"+f.name)
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				done <- runCrashCell(point, f.name, f.fault, cellDir)
			})
		}
	}
	for _, point := range crashPoints {
		t.Run(point, func(t *testing.T) {
			for _, f := range crashFaults {
				t.Run(f.name, func(t *testing.T) { checkCrashCell(t, <-cells[point+"/"+f.name]) })
			}
		})
	}
}

// checkCrashCell asserts what the matrix promises for one cell.
func checkCrashCell(t *testing.T, c *crashCell) {
	require.NoError(t, c.err, "worker output:\n%s", c.workerOut)
	var exitErr *exec.ExitError
	require.ErrorAs(t, c.workerExit, &exitErr, "the worker ended without a crash:\n%s", c.workerOut)
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "worker ended by %v, not SIGKILL:\n%s", ws, c.workerOut)
	require.Contains(t, c.workerOut, "crashed="+c.point)

	pending := 0
	for _, r := range c.afterCrash {
		if r.State == StatePending {
			pending++
		}
	}
	require.NotZero(t, pending, "the crash left nothing pending: it did not interrupt an operation")

	for _, o := range c.outcomes {
		var pe *PendingError
		if !errors.As(o.Err, &pe) {
			require.NoError(t, o.Err, "Resume of %s", o.Record.OperationID)
		}
	}
	for ref, n := range c.unsentEffects {
		require.Zero(t, n, "%s has no record, yet the server acted on it: sent before its write-ahead", ref)
	}

	refs := make([]string, crashOps)
	for i := range refs {
		refs[i] = crashRef(i)
		require.Equal(t, 1, c.ledger.Effects[refs[i]], "effects of %s; ledger %+v", refs[i], c.ledger)
	}
	require.NoError(t, c.ledger.Check(refs))
	require.Zero(t, c.ledger.Mismatches, "a key was reused with other bytes")

	require.Len(t, c.final, crashOps)
	for _, r := range c.final {
		require.Equal(t, StateSettled, r.State, "%s after the restart", r.OperationID)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.OperationID)
	}
	t.Logf("%d pending after the crash; %d Resume pass(es), %d outcome(s); %d sent anew; server: %d requests, %d replays, %d 409, faults %v; %v",
		pending, c.passes, len(c.outcomes), c.reissued, c.ledger.Requests, c.ledger.Replays, c.ledger.InProgress,
		c.ledger.Faults, c.took.Round(time.Millisecond))
}

// runCrashCell runs one cell: the worker to its crash, then the restart.
func runCrashCell(point, faultName string, fault testserver.Fault, dir string) (c *crashCell) {
	c = &crashCell{point: point, fault: faultName}
	start := time.Now()
	defer func() { c.took = time.Since(start) }()
	srv := testserver.NewServer(&testserver.Options{RequireKey: true})
	defer srv.Close()
	srv.Script(fault)
	path := filepath.Join(dir, "crash.journal")
	if c.err = os.MkdirAll(dir, 0o700); c.err != nil {
		return c
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperCommand(ctx, "crash", envJournal+"="+path, envURL+"="+srv.URL, envCrashPoint+"="+point)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c.workerExit = cmd.Run()
	c.workerOut = out.String()
	if ctx.Err() != nil {
		c.err = fmt.Errorf("worker still running after 30 s")
		return c
	}
	c.err = restartAfterCrash(ctx, c, srv, path)
	c.ledger = srv.Ledger()
	return c
}

// restartAfterCrash does what the worker's next life would: reopen the
// journal, Resume until nothing is pending, send again the operations that
// were never written ahead; then it closes the journal and reads it back.
func restartAfterCrash(ctx context.Context, c *crashCell, srv *testserver.Server, path string) error {
	j, err := boltjournal.Open(path, nil)
	if err != nil {
		return err
	}
	defer j.Close()
	if c.afterCrash, err = j.Records(); err != nil {
		return err
	}
	opts := crashOptions()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	opts.Base = base
	tr, err := NewTransport(j, opts)
	if err != nil {
		return err
	}
	for {
		c.passes++
		err := tr.Resume(ctx, func(o Outcome) {
			if o.Response != nil {
				io.Copy(io.Discard, o.Response.Body)
				o.Response.Body.Close()
				o.Response = nil
			}
			c.outcomes = append(c.outcomes, o)
		})
		if err != nil {
			return err
		}
		n, err := pendingCount(j)
		if err != nil || n == 0 {
			break
		}
		if c.passes == 100 || ctx.Err() != nil {
			return fmt.Errorf("%d operation(s) still pending after %d Resume passes", n, c.passes)
		}
		time.Sleep(20 * time.Millisecond) // an operation Resume skipped until its NextAttempt
	}

	l := srv.Ledger()
	c.unsentEffects = make(map[string]int)
	for i := range crashOps {
		rec, err := j.Lookup(crashOpID(i))
		if err != nil {
			return err
		}
		if rec != nil {
			continue
		}
		c.unsentEffects[crashRef(i)] = l.Effects[crashRef(i)]
		c.reissued++
		if err := sendCrashOp(tr, srv.URL, i); err != nil {
			return fmt.Errorf("sending %s anew: %w", crashOpID(i), err)
		}
	}
	if err := j.Close(); err != nil {
		return err
	}
	ro, err := boltjournal.OpenReadOnly(path, time.Second)
	if err != nil {
		return err
	}
	defer ro.Close()
	c.final, err = ro.Records()
	return err
}
