// This file is the smoke test: the whole benchmark with tiny settings, its
// output checked for every row and for positive ratios. CI runs it with
// `cd bench && go test ./...`. The test binary is also the server child.

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/bench/serverbench"
)

func TestMain(m *testing.M) {
	if isServeChild() {
		os.Exit(serveChild())
	}
	if serverbench.IsChild() {
		os.Exit(serverbench.ServeChild())
	}
	os.Exit(m.Run())
}

func TestSmoke(t *testing.T) {
	cfg, err := parseFlags([]string{"-c", "1,4", "-d", "100ms", "-rounds", "1", "-resume", "200", "-server-delay", "1ms", "-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, cfg, &out, testWriter{t}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	report := out.String()
	t.Log("\n" + report)

	for _, name := range []string{"net/http GET", "idem GET", contractGETRow, "net/http POST", "retryablehttp POST", "idem POST", floorRow} {
		rows := linesWithPrefix(report, name+" ")
		if len(rows) != len(cfg.conc) {
			t.Errorf("%d rows for %q, want one per concurrency (%d)", len(rows), name, len(cfg.conc))
		}
		for _, row := range rows {
			f := strings.Fields(strings.TrimPrefix(row, name))
			if len(f) != 8 {
				t.Errorf("row %q: %d columns after the name, want 8", row, len(f))
				continue
			}
			if rps, err := strconv.ParseFloat(f[0], 64); err != nil || rps <= 0 {
				t.Errorf("row %q: req/s %q is not a positive number", row, f[0])
			}
			if wantCommits := name == "idem POST" || name == floorRow; wantCommits != (f[5] != "-") {
				t.Errorf("row %q: commits/op %q", row, f[5])
			}
			if cpu, err := time.ParseDuration(strings.Replace(f[6], "µs", "us", 1)); runtime.GOOS == "linux" && (err != nil || cpu <= 0) {
				t.Errorf("row %q: cpu/req %q is not a positive duration", row, f[6])
			}
			if pages, err := strconv.ParseFloat(f[7], 64); (name == "idem POST" || name == floorRow) && (err != nil || pages < 2) {
				t.Errorf("row %q: pages/commit %q, want a number of at least 2 (a leaf and a meta page)", row, f[7])
			}
		}
	}

	ratios := linesWithPrefix(report, "ratio ")
	want := 0
	for _, d := range ratioDefs {
		if !strings.HasPrefix(d[0], "pg") && !strings.HasPrefix(d[0], "idem-pg") { // those of the PostgreSQL rows need -postgres
			want++
		}
	}
	if len(ratios) != want {
		t.Errorf("%d ratio lines, want %d", len(ratios), want)
	}
	for _, line := range ratios {
		var xs []string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutSuffix(f, "x"); ok {
				xs = append(xs, v)
			}
		}
		if len(xs) != len(cfg.conc) {
			t.Errorf("ratio line %q: %d ratios, want %d", line, len(xs), len(cfg.conc))
		}
		for _, x := range xs {
			if v, err := strconv.ParseFloat(x, 64); err != nil || v <= 0 {
				t.Errorf("ratio line %q: %q is not a positive number", line, x)
			}
		}
	}

	_, underLoad, _ := strings.Cut(report, "write-ahead under load")
	for _, c := range cfg.conc {
		rows := linesWithPrefix(underLoad, fmt.Sprintf("c=%d ", c))
		if len(rows) == 0 {
			t.Errorf("no write-ahead row for c=%d", c)
			continue
		}
		f := strings.Fields(rows[0])
		if len(f) != 7 {
			t.Errorf("write-ahead row %q: %d columns, want 7", rows[0], len(f))
		} else if n, err := strconv.ParseFloat(f[4], 64); err != nil || n <= 0 {
			// Positive, not at least 1: a deferred settle's own flush is a commit that
			// carries no write-ahead, and on a loaded machine those can outnumber them.
			t.Errorf("write-ahead row %q: ops/commit %q, want a positive number", rows[0], f[4])
		}
	}

	_, commits, _ := strings.Cut(report, "commits under load")
	commitRows := map[string]int{}
	for line := range strings.Lines(commits) {
		row := strings.TrimSpace(line)
		if strings.HasPrefix(row, "c=") {
			_, row, _ = strings.Cut(row, " ")
			row = strings.TrimSpace(row)
		}
		for _, name := range []string{"idem POST", floorRow} {
			if strings.HasPrefix(row, name+" ") {
				commitRows[name]++
				checkCommitRow(t, row)
			}
		}
	}
	if commitRows["idem POST"] != len(cfg.conc) || commitRows[floorRow] != len(cfg.conc) {
		t.Errorf("commit rows %v, want %d of each", commitRows, len(cfg.conc))
	}

	for _, want := range []string{"-server-delay 1ms", "the server sleeps 1ms", "ratio idem POST ÷ floor POST", "ratio idem POST ÷ contract floor POST", "warm Resume ÷ warm contract floor resume", "ratio floor POST ÷ net/http POST", "added latency at c=1", "Observer.WriteAhead", "a bare commit before each POST", "fsync ", "bbolt commit ",
		"resume: 200 pending", "200 re-sent, 200 answered 201", "every operation re-sent once",
		"peak HeapInuse", "CPU per operation during Resume: client", "the same 200 POSTs sent by plain net/http",
		"warm Resume ÷ net/http sending the same", "wide Resume ÷ net/http sending the same",
		"warm floor resume ÷ net/http sending the same", "warm Resume ÷ warm floor resume", "total run time"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Allocations per operation: Resume's passes, the floor resume's and the
	// plain sends', each a positive count.
	allocLines := 0
	for _, line := range strings.Split(report, "\n") {
		_, rest, ok := strings.Cut(line, "allocs    per operation during Resume: ")
		if !ok {
			_, rest, ok = strings.Cut(line, "; ")
			if !ok || !strings.Contains(rest, " allocations, ") {
				continue
			}
			_, rest, _ = strings.Cut(rest, "; ")
		}
		n, _, _ := strings.Cut(rest, " allocations")
		if v, err := strconv.ParseFloat(n, 64); err != nil || v <= 0 {
			t.Errorf("line %q: allocations per operation %q is not a positive number", line, n)
		}
		allocLines++
	}
	if want := 3 + 2 + 2 + 2; runtime.GOOS == "linux" && allocLines != want { // passes, floor and contract floor resumes, plain sends
		t.Errorf("%d lines with allocations per resumed operation, want %d", allocLines, want)
	}
	if passes := strings.Count(report, "200 re-sent, 200 answered 201"); runtime.GOOS == "linux" && passes != 3 {
		t.Errorf("%d resume passes reported, want 3 (warm, cold and wide)", passes)
	}
	for _, line := range linesWithPrefix(report, "    ratio ") {
		f := strings.Fields(line)
		x, ok := strings.CutSuffix(f[len(f)-2], "x")
		if v, err := strconv.ParseFloat(x, 64); !ok || err != nil || v <= 0 {
			t.Errorf("resume ratio line %q: median %q is not a positive ratio", line, f[len(f)-2])
		}
	}
	if n := len(linesWithPrefix(report, "    ratio ")); runtime.GOOS == "linux" && n != 11 {
		t.Errorf("%d resume ratio lines, want 11 (warm, cold, the floor's four, the contract floor's four and wide)", n)
	}
	for line := range strings.Lines(report) {
		if f := strings.Fields(line); len(f) > 0 && strings.EqualFold(strings.TrimSuffix(f[0], ":"), "note") {
			t.Errorf("report has a note (failed requests or a short backlog): %s", strings.TrimSpace(line))
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.quantile(c.q)
		if diff := float64(got-c.want) / float64(c.want); diff < -0.016 || diff > 0.016 {
			t.Errorf("quantile(%v) = %v, want %v within 1.6%%", c.q, got, c.want)
		}
	}
}

// checkCommitRow checks a row of the commit table after its level: the
// client's name, then an interval, ops and pages per commit, and three
// times per commit, the write no longer than the commit.
func checkCommitRow(t *testing.T, row string) {
	t.Helper()
	f := strings.Fields(row)
	if len(f) != 8 {
		t.Errorf("commit row %q: %d columns, want 8", row, len(f))
		return
	}
	var d [4]time.Duration
	for i, col := range []int{2, 5, 6, 7} {
		var err error
		if d[i], err = time.ParseDuration(f[col]); err != nil || d[i] <= 0 {
			t.Errorf("commit row %q: %q is not a positive duration", row, f[col])
		}
	}
	if ops, err := strconv.ParseFloat(f[3], 64); err != nil || ops <= 0 {
		t.Errorf("commit row %q: ops/commit %q, want a positive number (see the write-ahead rows)", row, f[3])
	}
	if d[2] > d[1] {
		t.Errorf("commit row %q: write+fsync %v longer than the commit %v", row, d[2], d[1])
	}
}

func linesWithPrefix(s, prefix string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// testWriter sends progress notes to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
