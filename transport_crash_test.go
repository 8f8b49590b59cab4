// SIGKILL at transport.go's crash points, in child processes (helper modes,
// helpers_test.go): the crash matrix (every crash point and testserver fault),
// the same along a redirect chain, and the journal torture test (a writer
// killed over and over; IDEM_TORTURE_KILLS, default 20, 6 with -short). After
// each, a restart resumes and the server's ledger shows every operation took
// effect exactly once. Apart from transport_test.go to keep each readable.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// crashTransport opens the journal at IDEM_JOURNAL and a Transport over it
// with crashOptions, for a crash worker; the caller closes the journal.
func crashTransport() (*Transport, *boltjournal.Journal, error) {
	j, err := boltjournal.Open(os.Getenv(envJournal), nil)
	if err != nil {
		return nil, nil, err
	}
	tr, err := NewTransport(j, crashOptions())
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	return tr, j, nil
}

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
	tr, j, err := crashTransport()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Close()
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

// Environment of the torture-writer child.
const (
	envRun     = "IDEM_RUN"     // this child's number, for operation IDs
	envWorkers = "IDEM_WORKERS" // goroutines sending payments
)

// tortureMix is the testserver fault mix: enough lost answers and refusals
// to leave operations pending for the next child to resume.
const tortureMix = "lost=0.05,drop=0.03,reset=0.02,500=0.05"

func tortureKills(tb testing.TB) int {
	if s := os.Getenv("IDEM_TORTURE_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(tb, err, "IDEM_TORTURE_KILLS")
		return n
	}
	if testing.Short() {
		return 6
	}
	return 20
}

func TestJournalTortureSIGKILL(t *testing.T) {
	t.Parallel()
	kills := tortureKills(t)
	plan, err := testserver.ParsePlan(42, tortureMix)
	require.NoError(t, err)
	srv := startPayments(t, &testserver.Options{RequireKey: true, Plan: plan})
	path := filepath.Join(t.TempDir(), "torture.journal")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	reported := map[string]bool{} // op IDs whose write-ahead a child saw return
	var previous []string         // op IDs in the journal at the last reopen
	var lifetimes, reopens time.Duration
	start := time.Now()
	for run := range kills {
		life := time.Duration(20+rng.IntN(131)) * time.Millisecond
		ops := runAndKill(t, run, life, "torture-writer", envJournal+"="+path, envURL+"="+srv.URL,
			envRun+"="+strconv.Itoa(run), envWorkers+"=16")
		lifetimes += life
		for _, id := range ops {
			reported[id] = true
		}

		// The journal reopens at once, whole, and holds every operation
		// written ahead so far, including everything it held before.
		t0 := time.Now()
		j, err := boltjournal.Open(path, &boltjournal.Options{OpenTimeout: time.Second})
		require.NoError(t, err, "reopen after kill %d", run+1)
		recs, err := j.Records()
		require.NoError(t, err, "read after kill %d", run+1)
		require.NoError(t, j.Close())
		reopens += time.Since(t0)
		have := make(map[string]bool, len(recs))
		for _, r := range recs {
			have[r.OperationID] = true
		}
		for id := range reported {
			require.True(t, have[id], "kill %d: op %s was written ahead, then lost", run+1, id)
		}
		for _, id := range previous {
			require.True(t, have[id], "kill %d: op %s was in the journal, then lost", run+1, id)
		}
		previous = previous[:0]
		for id := range have {
			previous = append(previous, id)
		}
		t.Logf("kill %d after %v: %d ops written ahead in this run, %d in the journal", run+1, life, len(ops), len(recs))
	}
	wall := time.Since(start)

	// Finish what the last child left, then check the server's ledger: every
	// operation in the journal paid exactly once, and nothing paid that the
	// journal does not know.
	c, err := Open(path, &Options{InitialInterval: time.Millisecond, MaxInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	var pending int
	for range 50 {
		require.NoError(t, c.Resume(context.Background(), nil))
		if pending, err = pendingCount(c.Journal()); err != nil || pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond) // Retry-After and backoff from the children
	}
	require.NoError(t, err)
	require.Zero(t, pending, "still pending after resuming")
	recs, err := c.Journal().Records()
	require.NoError(t, err)
	var refs []string
	states := map[State]int{}
	for _, r := range recs {
		refs = append(refs, r.OperationID)
		states[r.State]++
	}
	ledger := srv.Ledger()
	require.NoError(t, ledger.Check(refs))
	for ref := range ledger.Effects {
		require.True(t, slices.Contains(refs, ref), "%s paid but not in the journal", ref)
	}
	require.Equal(t, len(recs), states[StateSettled], "states %v", states)
	t.Logf("%d SIGKILLs (lifetimes 20-150 ms, %v in all) in %v: %d operations reported written ahead, %d in the journal, "+
		"all found after every kill; reopen+read %v on average; then all settled, exactly once (%d requests, %d replays, faults %v)",
		kills, lifetimes, wall.Round(time.Millisecond), len(reported), len(recs),
		(reopens / time.Duration(kills)).Round(time.Microsecond), ledger.Requests, ledger.Replays, ledger.Faults)
}

// helperTortureWriter opens the journal, resumes in the background what
// earlier children left, and sends journaled payments from IDEM_WORKERS
// goroutines until it is killed. It prints "ready" once the journal is open,
// and "op=ID" for each operation right after its write-ahead commit returned.
// Returning at all is a failure.
func helperTortureWriter() int {
	run, workers := os.Getenv(envRun), 16
	if n, err := strconv.Atoi(os.Getenv(envWorkers)); err == nil {
		workers = n
	}
	c, err := Open(os.Getenv(envJournal), &Options{Journal: boltjournal.Options{OpenTimeout: 5 * time.Second},
		InitialInterval: 5 * time.Millisecond, MaxInterval: 50 * time.Millisecond,
		ResumeInterval: 20 * time.Millisecond, Observer: writeAheadReporter{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer c.Close()
	fmt.Println("ready")
	stop := c.StartResumer(context.Background(), nil)
	defer stop()
	base := os.Getenv(envURL) + "/payments"
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range 5000 { // bounded; the parent kills the child long before
				id := fmt.Sprintf("r%s-w%d-%d", run, w, k)
				ctx := WithOperationID(context.Background(), id)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base, strings.NewReader(paymentBody(id, 100+k)))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				if resp, err := c.HTTPClient().Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, "torture-writer was not killed")
	return 4
}

// writeAheadReporter prints the operation ID of every write-ahead that
// committed, as soon as the commit returned.
type writeAheadReporter struct{ NopObserver }

func (writeAheadReporter) WriteAhead(ctx context.Context, _ time.Duration, err error) {
	if id, ok := ctx.Value(opIDCtx).(string); ok && err == nil {
		// One write(2) per line, below PIPE_BUF: lines from concurrent
		// goroutines never interleave.
		os.Stdout.WriteString("op=" + id + "\n")
	}
}

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
	tr, j, err := crashTransport()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Close()
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
