package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Millisecond
	}
	rand.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
	p50, p99 := percentiles(ds)
	require.Equal(t, 50*time.Millisecond, p50)
	require.Equal(t, 99*time.Millisecond, p99)

	p50, p99 = percentiles([]time.Duration{7})
	require.Equal(t, []time.Duration{7, 7}, []time.Duration{p50, p99})
	p50, p99 = percentiles(nil)
	require.Equal(t, []time.Duration{0, 0}, []time.Duration{p50, p99})
}

// readProcStats sees what this process holds: files it opens, goroutines it
// starts and memory it keeps.
func TestReadProcStatsCountsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd here")
	}
	runtime.GC() // garbage collected between the two reads would hide what is kept
	before := readProcStats()
	dir := t.TempDir()
	var files []*os.File
	for i := range 10 {
		f, err := os.Create(filepath.Join(dir, string(rune('a'+i))))
		require.NoError(t, err)
		files = append(files, f)
	}
	release := make(chan struct{})
	for range 100 {
		go func() { <-release }()
	}
	kept := make([]byte, 32<<20)
	for i := range kept {
		kept[i] = byte(i)
	}
	runtime.GC()
	during := readProcStats()
	close(release)
	for _, f := range files {
		f.Close()
	}
	require.GreaterOrEqual(t, during.files-before.files, 10, "open files")
	require.GreaterOrEqual(t, during.goroutines-before.goroutines, 100, "goroutines")
	require.GreaterOrEqual(t, int64(during.heap)-int64(before.heap), int64(30<<20), "heap in use: 32 MiB kept, less what other spans freed")
	require.Equal(t, byte(0xff), kept[len(kept)-1]) // keeps kept alive until the figures are read
}

// The worker's stats line, as the parent reads it: the pending gauge summed
// from the Observer's deltas, the commits since the last line with their
// percentiles, and the process's own figures.
func TestWorkerStatsLineRoundTrip(t *testing.T) {
	s := &workerStats{}
	s.PendingChanged(5)
	s.PendingChanged(-2)
	for i := range 100 {
		s.WriteAhead(context.Background(), time.Duration(100-i)*time.Millisecond, nil)
	}
	s.WriteAhead(context.Background(), time.Hour, errors.New("disk full")) // nothing committed: not timed
	var buf lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.report(ctx, newLineWriter(&buf), 10*time.Millisecond); close(done) }()
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") >= 2 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done

	lines := strings.Split(buf.String(), "\n")
	f := strings.Fields(lines[0])
	require.Equal(t, "stats", f[0])
	ws, err := parseWorkerStats(f[1:])
	require.NoError(t, err)
	require.Equal(t, 3, ws.pending)
	require.Equal(t, 100, ws.commits)
	require.Equal(t, 50*time.Millisecond, ws.p50)
	require.Equal(t, 99*time.Millisecond, ws.p99)
	require.Positive(t, ws.heap)
	require.Positive(t, ws.goroutines)
	require.Positive(t, ws.files)

	// The next line covers only its own interval: no commits since.
	ws, err = parseWorkerStats(strings.Fields(lines[1])[1:])
	require.NoError(t, err)
	require.Equal(t, []any{0, time.Duration(0), time.Duration(0), 3}, []any{ws.commits, ws.p50, ws.p99, ws.pending})
}

func TestParseWorkerStatsBadInput(t *testing.T) {
	for _, line := range []string{"", "1 2 3", "1 2 3 4 5 6 7 8", "1 2 x 4 5 6 7", "1 2 3 4 5 6 99999999999999999999"} {
		_, err := parseWorkerStats(strings.Fields(line))
		require.Error(t, err, "%q", line)
	}
}
