// The journal under SIGKILL: a child process sends journaled payments from
// many goroutines (and resumes what earlier children left) until the parent
// kills it, over and over. After every kill the journal must reopen cleanly
// and hold every operation whose write-ahead commit had returned; at the end
// everything settles exactly once.
//
// IDEM_TORTURE_KILLS sets the number of kills (default 20, 6 with -short);
// the full run is
//
//	IDEM_TORTURE_KILLS=100 go test -race -count=1 -run TestJournalTortureSIGKILL -v .

package idem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

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
	if id, ok := operationIDFrom(ctx); ok && err == nil {
		// One write(2) per line, below PIPE_BUF: lines from concurrent
		// goroutines never interleave.
		os.Stdout.WriteString("op=" + id + "\n")
	}
}
