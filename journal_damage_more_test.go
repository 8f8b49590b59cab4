// More damage for journal.go (journal_damage_test.go holds whole-file
// damage and truncation): meta pages zeroed or overwritten, data pages
// overwritten, and a file the process may not read. Every case gives a typed
// error naming the path, or a journal that still works; never a panic or a
// hang.

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// journalPageSize returns the page size of the journal file at path.
func journalPageSize(tb testing.TB, path string) int {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(tb, err)
	defer db.Close()
	return db.Info().PageSize
}

// withDeadline runs fn, and ends the test binary with a goroutine dump if
// it does not return within d: a damaged journal must never hang its caller.
func withDeadline(tb testing.TB, d time.Duration, what string, fn func()) {
	tb.Helper()
	watchdog := time.AfterFunc(d, func() {
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		panic(fmt.Sprintf("%s: %s did not return within %v", tb.Name(), what, d))
	})
	defer watchdog.Stop()
	fn()
}

// requireCorruptOrNil asserts err is nil or a journal error naming path.
func requireCorruptOrNil(tb testing.TB, err error, path, what string) {
	tb.Helper()
	if err == nil {
		return
	}
	require.ErrorIs(tb, err, ErrJournalCorrupt, what)
	require.Contains(tb, err.Error(), path, what)
}

func TestJournalMetaPagesDamaged(t *testing.T) {
	good, _ := goodJournalFile(t)
	scratch := filepath.Join(t.TempDir(), "probe.journal")
	require.NoError(t, os.WriteFile(scratch, good, 0o600))
	ps := journalPageSize(t, scratch)
	rng := rand.New(rand.NewPCG(1, 2))

	// damage returns a copy of good with bytes [from, to) replaced by fill.
	damage := func(from, to int, fill func([]byte)) []byte {
		b := bytes.Clone(good)
		fill(b[from:to])
		return b
	}
	zero := func(b []byte) { clear(b) }
	random := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	headers := bytes.Clone(good) // each meta page's page header and meta fields
	clear(headers[:64])
	clear(headers[ps : ps+64])
	tests := []struct {
		name string
		file []byte
	}{
		{"both meta pages zeroed", damage(0, 2*ps, zero)},
		{"both meta pages random", damage(0, 2*ps, random)},
		{"both meta headers zeroed", headers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			require.NoError(t, os.WriteFile(path, tt.file, 0o600))
			withDeadline(t, 10*time.Second, "open", func() {
				j, err := OpenJournal(path, &JournalOptions{OpenTimeout: 200 * time.Millisecond})
				if j != nil {
					j.Close()
				}
				require.ErrorIs(t, err, ErrJournalCorrupt)
				require.Contains(t, err.Error(), path)
				ro, err := OpenJournalReadOnly(path, 200*time.Millisecond)
				if ro != nil {
					ro.Close()
				}
				require.ErrorIs(t, err, ErrJournalCorrupt)
				require.Contains(t, err.Error(), path)
			})
		})
	}

	// bbolt keeps two meta pages and uses the newer valid one: with one of
	// them damaged it would open the file at worst one commit older, so
	// idem refuses it (journal_meta.go) until the older commit is accepted.
	for i := range 2 {
		t.Run(fmt.Sprintf("meta page %d zeroed", i), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.journal")
			require.NoError(t, os.WriteFile(path, damage(i*ps, (i+1)*ps, zero), 0o600))
			withDeadline(t, 10*time.Second, "open", func() {
				_, err := OpenJournal(path, nil)
				var meta *MetaPageError
				require.ErrorAs(t, err, &meta)
				require.Equal(t, i, meta.Page)
				_, err = AcceptOlderCommit(path, 0)
				require.NoError(t, err)
				j, err := OpenJournal(path, nil)
				require.NoError(t, err)
				defer j.Close()
				recs, err := j.Records()
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(recs), 59, "at most the last commit is lost")
			})
		})
	}
}

func TestJournalDataPagesRandom(t *testing.T) {
	t.Parallel()
	// Random bytes over pages past the meta pages, whole or just their
	// headers: bbolt may notice at open, at a read or at a write, or not at
	// all (it has no checksum on data pages). Every call must end with nil
	// or ErrJournalCorrupt naming the path.
	good, hw := goodJournalFile(t)
	scratch := filepath.Join(t.TempDir(), "probe.journal")
	require.NoError(t, os.WriteFile(scratch, good, 0o600))
	ps := int64(journalPageSize(t, scratch))
	pages := hw / ps
	srv := startPayments(t, nil)
	seeds := 24
	if testing.Short() {
		seeds = 8
	}
	corrupt := map[string]int{} // by the call that first said so
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		b := bytes.Clone(good)
		span := ps
		if seed%2 == 1 {
			span = 16 // a page header: id, flags, count, overflow
		}
		for range 1 + rng.IntN(3) {
			p := 2 + rng.Int64N(pages-2)
			for i := p * ps; i < p*ps+span; i++ {
				b[i] = byte(rng.Uint32())
			}
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seed-%d.journal", seed))
		require.NoError(t, os.WriteFile(path, b, 0o600))
		first := ""
		check := func(err error, what string) {
			t.Helper()
			requireCorruptOrNil(t, err, path, what)
			if err != nil && first == "" {
				first = what
			}
		}
		withDeadline(t, 20*time.Second, fmt.Sprintf("seed %d", seed), func() {
			j, err := OpenJournal(path, &JournalOptions{OpenTimeout: 200 * time.Millisecond})
			check(err, "open")
			if err != nil {
				return
			}
			defer func() { check(j.Close(), "Close") }()
			_, err = j.Records()
			check(err, "Records")
			_, err = j.Lookup("op-1")
			check(err, "Lookup")
			tr, err := NewTransport(j, &Options{MaxAttempts: 1})
			require.NoError(t, err)
			check(tr.Resume(context.Background(), nil), "Resume")
			req := newRequest(t, http.MethodPost, srv.URL+"/payments", paymentBody(fmt.Sprintf("seed-%d", seed), 1))
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				drain(t, resp)
			}
			check(err, "RoundTrip")
			_, err = j.Prune(0)
			check(err, "Prune")
		})
		if first == "" {
			first = "none"
		}
		corrupt[first]++
	}
	t.Logf("%d damaged journals; ErrJournalCorrupt first reported by: %v", seeds, corrupt)
}

func TestJournalUnreadable(t *testing.T) {
	// A directory anyone may enter (t.TempDir's parent is private to its
	// owner), holding a journal no one may read and, as a control, one
	// anyone may.
	dir, err := os.MkdirTemp("", "idem-unreadable-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	path, control := filepath.Join(dir, "locked-out.journal"), filepath.Join(dir, "readable.journal")
	for _, p := range []string{path, control} {
		j, err := OpenJournal(p, nil)
		require.NoError(t, err)
		require.NoError(t, j.Close())
	}
	require.NoError(t, os.Chmod(path, 0))
	require.NoError(t, os.Chmod(control, 0o644))

	if os.Geteuid() != 0 {
		start := time.Now()
		for name, open := range map[string]func() (*Journal, error){
			"OpenJournal":         func() (*Journal, error) { return OpenJournal(path, nil) },
			"OpenJournalReadOnly": func() (*Journal, error) { return OpenJournalReadOnly(path, 0) },
		} {
			j, err := open()
			if j != nil {
				j.Close()
			}
			require.ErrorIs(t, err, fs.ErrPermission, name)
			require.Contains(t, err.Error(), path, name)
		}
		require.Less(t, time.Since(start), DefaultOpenTimeout, "no lock wait for a file it cannot open")
		return
	}
	// Root reads a mode-0 file all the same: a child process gives up root
	// (setuid to nobody) before it opens the journal.
	t.Log("running as root: the open runs in a child process that first drops to uid 65534")
	report, out := runHelper(t, "open-unprivileged", envJournal+"="+path, envControl+"="+control)
	if report["setuid"] != "ok" {
		t.Skipf("the child cannot drop root: %s", out)
	}
	require.Equal(t, "<nil>", report["control"], "the child reads a readable journal in the same directory: %s", out)
	for _, name := range []string{"OpenJournal", "OpenJournalReadOnly"} {
		t.Logf("%s as uid %d: %s", name, nobody, report[name+".err"])
		require.Equal(t, "true", report[name+".permission"], "%s: %s", name, out)
		require.Contains(t, report[name+".err"], path, name)
		elapsed, err := time.ParseDuration(report[name+".elapsed"])
		require.NoError(t, err)
		require.Less(t, elapsed, DefaultOpenTimeout, "%s: no lock wait for a file it cannot open", name)
	}
}

// envControl names a journal the unprivileged child may read.
const envControl = "IDEM_CONTROL"

// helperOpenUnprivileged drops root, then opens the journal at IDEM_JOURNAL
// for writing and for reading, and reports each error, whether it matches
// fs.ErrPermission, and how long the open took; and the error of a read-only
// open of IDEM_CONTROL.
func helperOpenUnprivileged() int {
	if err := setuidNobody(); err != nil {
		fmt.Printf("setuid=%v\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	fmt.Println("setuid=ok")
	ctl, err := OpenJournalReadOnly(os.Getenv(envControl), 0)
	fmt.Printf("control=%v\n", err)
	if ctl != nil {
		ctl.Close()
	}
	path := os.Getenv(envJournal)
	for name, open := range map[string]func() (*Journal, error){
		"OpenJournal":         func() (*Journal, error) { return OpenJournal(path, nil) },
		"OpenJournalReadOnly": func() (*Journal, error) { return OpenJournalReadOnly(path, 0) },
	} {
		start := time.Now()
		j, err := open()
		fmt.Printf("%s.elapsed=%s\n%s.permission=%v\n%s.err=%v\n", name, time.Since(start),
			name, errors.Is(err, fs.ErrPermission), name, err)
		if j != nil {
			j.Close()
		}
	}
	return 0
}
