package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newSoakSide is a side in a soak, without a server or a worker, for the
// sampler's bookkeeping.
func newSoakSide(t *testing.T) *side {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "j")
	require.NoError(t, os.WriteFile(journal, make([]byte, 3<<20), 0o600))
	return &side{state: journal, soak: &soakRun{cfg: &soakConfig{every: time.Second}}}
}

// A sample takes the worker's last stats line once, the journal file's size
// and the run's counts.
func TestTakeSample(t *testing.T) {
	s := newSoakSide(t)
	s.settled.add(opID(0))
	s.settled.add(opID(1))
	s.kills = 4
	s.mu.Lock()
	require.True(t, s.soakLine(strings.Fields("stats 1048576 12 9 3 40 1500000 9000000")), "a stats line is the soak's")
	require.False(t, s.soakLine(strings.Fields("start order-0041/charge 1700000000")), "a start line goes on to the side's count")
	s.mu.Unlock()

	smp := s.takeSample(5 * time.Second)
	require.Equal(t, 5*time.Second, smp.at)
	require.Equal(t, int64(3<<20), smp.journalBytes)
	require.Equal(t, []int{2, 4}, []int{smp.settled, smp.kills})
	require.NotNil(t, smp.client)
	require.Equal(t, workerSample{procStats: procStats{heap: 1 << 20, goroutines: 12, files: 9}, pending: 3, commits: 40,
		p50: 1500 * time.Microsecond, p99: 9 * time.Millisecond}, *smp.client)
	require.Positive(t, smp.server.goroutines, "this process's own figures")
	require.Contains(t, smp.describe(), "journal 3.00 MiB; client: heap 1.0 MiB, 12 goroutines, 9 files, 3 pending, 40 commits p50 1.5ms p99 9ms")
	require.Equal(t, -1, smp.liveKeys, "no cluster, no store to count")
	smp.liveKeys = 7
	require.Contains(t, smp.describe(), "journal 3.00 MiB; store: 7 live keys; client:")

	// No stats line since: the next sample has no client figures.
	require.NoError(t, os.Remove(s.state))
	smp = s.takeSample(10 * time.Second)
	require.Nil(t, smp.client)
	require.Equal(t, int64(-1), smp.journalBytes)
	require.Len(t, s.soak.samples, 2)
	require.Equal(t, 42, s.soak.started)
}

// The CSV has a column per figure, in a fixed order, and an empty cell where
// a figure was not there.
func TestWriteCSV(t *testing.T) {
	samples := []sample{
		{at: 5 * time.Second, server: procStats{heap: 4 << 20, goroutines: 20, files: 11}, journalBytes: 1 << 20, settled: 100, liveKeys: 90},
		{at: 10 * time.Second, server: procStats{heap: 6 << 20, goroutines: 22, files: 12}, journalBytes: 2 << 20, settled: 250, liveKeys: -1, kills: 1,
			client: &workerSample{procStats: procStats{heap: 3 << 19, goroutines: 40, files: 15}, pending: 32, commits: 80,
				p50: 2 * time.Millisecond, p99: 25 * time.Millisecond}},
	}
	path := filepath.Join(t.TempDir(), "soak.csv")
	require.NoError(t, writeCSV(path, samples))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"elapsed_s", "client_heap_mib", "client_goroutines", "client_open_files", "server_heap_mib", "server_goroutines",
			"server_open_files", "journal_mib", "pending", "commits", "commit_p50_ms", "commit_p99_ms", "settled", "server_live_keys", "kills"},
		{"5", "", "", "", "4", "20", "11", "1", "", "", "", "", "100", "90", "0"},
		{"10", "1.5", "40", "15", "6", "22", "12", "2", "32", "80", "2", "25", "250", "", "1"},
	}, rows)

	require.Error(t, writeCSV(filepath.Join(t.TempDir(), "no", "such", "dir.csv"), samples))
}
