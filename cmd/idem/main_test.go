package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// idemBinary builds the command once per test run.
func idemBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "idem-cmd-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "idem")
		out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%w: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

func runIdem(t *testing.T, bin string, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	require.NoError(t, ctx.Err(), "idem %v did not finish in %v:\n%s", args, timeout, out)
	return string(out), err
}

// The demo, cut down: the plain client charges some payments twice on the
// default fault plan (so the comparison cannot pass silently), and idem
// makes every payment exactly once through the same faults and kills.
func TestDemoProvesExactlyOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 2*time.Minute, "demo", "-n", "60", "-kills", "3", "-kill-within", "800ms", "-seed", "9")
	require.NoError(t, err, out)
	// The plain worker may finish before its last kill on a fast run; idem's,
	// slower by its journal, is killed all three times.
	require.Regexp(t, `SIGKILLs of the sending process\s+[1-3]\s+3\b`, out)
	require.Regexp(t, `made exactly once\s+\d+\s+60\b`, out)
	require.Regexp(t, `made twice or more \(charged again\)\s+[1-9]\d*\s+0\b`, out, "the plain client must charge twice")
	require.Regexp(t, `never made\s+\d+\s+0\b`, out)
	require.Regexp(t, `60/60 payments made exactly once through 3 SIGKILLs and \d+ injected faults; without idem: [1-9]\d* charged twice or more`, out)
	require.Contains(t, out, "one payment's story, with idem:")
	require.Contains(t, out, "(Idempotent-Replayed)")
	require.Regexp(t, `has one payment, pay_\w+: charged once`, out)
}

// journalWithRecords writes one settled and one pending operation.
func journalWithRecords(t *testing.T) string {
	t.Helper()
	srv := testserver.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Script(testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus, Status: 503})
	path := filepath.Join(t.TempDir(), "j.journal")
	c, err := idem.Open(path, &idem.Options{MaxAttempts: 1})
	require.NoError(t, err)
	defer c.Close()
	for _, op := range []string{"order-1/charge", "order-2/charge"} {
		req, err := http.NewRequestWithContext(idem.WithOperationID(context.Background(), op),
			http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":5,"currency":"eur","reference":"`+op+`"}`))
		require.NoError(t, err)
		if resp, err := c.HTTPClient().Do(req); err == nil {
			resp.Body.Close()
		}
	}
	return path
}

func TestJournalCommands(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t)

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out) // header, two records, count
	require.Contains(t, lines[1], "pending")
	require.Contains(t, lines[1], "order-2/charge")
	require.Contains(t, lines[2], "settled")

	out, err = runIdem(t, bin, 30*time.Second, "journal", "show", path, "order-2/charge")
	require.NoError(t, err, out)
	require.Contains(t, out, `"state": "pending"`)
	require.Contains(t, out, `\"reference\":\"order-2/charge\"`)

	out, err = runIdem(t, bin, 30*time.Second, "journal", "prune", "-retention", "1ns", "-force", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "pruned 1 record(s)")
	j, err := boltjournal.OpenReadOnly(path, 0)
	require.NoError(t, err)
	defer j.Close()
	recs, err := j.Records()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, idem.StatePending, recs[0].State, "pending records are never pruned")
}

func TestJournalLsWhileHeldSaysSoWithoutHanging(t *testing.T) {
	bin := idemBinary(t)
	path := filepath.Join(t.TempDir(), "held.journal")
	c, err := idem.Open(path, nil)
	require.NoError(t, err)
	defer c.Close()

	start := time.Now()
	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(out, "idem journal ls: "), out)
	require.Contains(t, out, "locked")
	require.Contains(t, out, path)
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestJournalLsMissingFile(t *testing.T) {
	bin := idemBinary(t)
	missing := filepath.Join(t.TempDir(), "nope.journal")
	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", missing)
	require.Error(t, err)
	require.Contains(t, out, "no such file")
	_, statErr := os.Stat(missing)
	require.True(t, os.IsNotExist(statErr), "inspecting must not create the file")
}
