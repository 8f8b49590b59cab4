// The ATTEMPTS column of journal ls says what the journal knows: a process
// SIGKILLed in the middle of a call, its request at the server, leaves an
// operation whose attempts were never recorded, which must not read as
// "never sent".

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/childtest"
	"github.com/stretchr/testify/require"
)

// lsRows runs journal ls on arg and returns each record's columns.
func lsRows(t *testing.T, bin, arg string) [][]string {
	t.Helper()
	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", arg)
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 2, out)
	require.Equal(t, []string{"ID", "STATE", "OPERATION", "KEY", "REQUEST", "ATTEMPTS", "STATUS", "CREATED", "NEXT", "ATTEMPT"},
		strings.Fields(lines[0]))
	var rows [][]string
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l) // REQUEST is two fields: method and URL
		rows = append(rows, append(f[:4:4], append([]string{f[4] + " " + f[5]}, f[6:]...)...))
	}
	return rows
}

// The demo's worker sends a payment; the server reads it and holds its
// answer; the worker is SIGKILLed. The journal holds the operation pending
// with no attempt recorded (a call records its attempts when it ends), and
// ls shows "0+?", with attempts_uncertain in -json, not "0".
func TestJournalLsAttemptsOfACallKilledMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a worker process")
	}
	bin := idemBinary(t)
	arrived := make(chan string, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case arrived <- r.Header.Get("Idempotency-Key") + " " + string(body):
		default:
		}
		select { // the answer never comes while the worker lives
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handler

	path := filepath.Join(t.TempDir(), "worker.journal")
	worker := exec.Command(bin, workerCommand, "-url", srv.URL, "-journal", path, "-n", "1",
		"-concurrency", "1", "-attempt-timeout", "1m")
	var out bytes.Buffer
	worker.Stdout, worker.Stderr = &out, &out
	require.NoError(t, worker.Start())
	var got string
	select {
	case got = <-arrived:
	case <-time.After(30 * time.Second):
		worker.Process.Kill()
		worker.Wait()
		t.Fatalf("no request reached the server in 30 s; worker:\n%s", out.String())
	}
	childtest.Kill(t, worker, nil, "worker", out.String) // the request at the server, its answer held

	rows := lsRows(t, bin, path)
	require.Len(t, rows, 1)
	row := rows[0]
	require.Equal(t, "pending", row[1])
	require.Equal(t, "0+?", row[5], "an operation the server received reads 0+?, never 0")
	require.True(t, strings.HasPrefix(got, row[3]+" "), "the server got key %s, the operation ls shows: %q", row[3], got)

	js, err := runIdem(t, bin, 30*time.Second, "journal", "ls", "-json", path)
	require.NoError(t, err, js)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &rec), js)
	require.EqualValues(t, 0, rec["attempts"])
	require.Equal(t, true, rec["attempts_uncertain"])
}

// Attempts recorded read as they are once the outcome is known; while it is
// not, "+?" follows them.
func TestJournalLsAttemptsOfFinishedAndPending(t *testing.T) {
	bin := idemBinary(t)
	rows := lsRows(t, bin, journalWithRecords(t)) // order-2 pending after one 503, order-1 settled
	require.Len(t, rows, 2)
	require.Equal(t, []string{"pending", "order-2/charge", "1+?"}, []string{rows[0][1], rows[0][2], rows[0][5]})
	require.Equal(t, []string{"settled", "order-1/charge", "1"}, []string{rows[1][1], rows[1][2], rows[1][5]})
}
