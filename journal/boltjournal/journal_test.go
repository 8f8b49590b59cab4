// Tests for journal.go: the file's mode, paths that are not journal files,
// files no one may read, and one opener at a time.

package boltjournal

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/stretchr/testify/require"
)

func TestJournalFileMode(t *testing.T) {
	_, path := testJournal(t)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// An empty file that becomes a journal (made by touch, or a configuration
// tool) gets the mode a new journal has: it will hold request bodies. A
// file that is a journal already keeps the mode its owner gave it.
func TestJournalInEmptyFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.journal")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	require.NoError(t, os.Chmod(path, 0o644)) // past the umask
	j, err := Open(path, nil)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, j.Close())
	require.NoError(t, os.Chmod(path, 0o640))
	j, err = Open(path, nil)
	require.NoError(t, err)
	defer j.Close()
	fi, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "a journal's own mode is its owner's choice")
}

func TestJournalPathIsDirectory(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	for _, open := range []func() error{
		func() error { _, err := Open(dir, nil); return err },
		func() error { _, err := OpenReadOnly(dir, 0); return err },
	} {
		err := open()
		require.Error(t, err)
		require.Contains(t, err.Error(), dir)
		require.False(t, errors.Is(err, journal.ErrLocked), "%v", err)
	}
	// A writer gets the file system's own answer.
	_, err := Open(dir, nil)
	require.Contains(t, err.Error(), "is a directory")
	require.Less(t, time.Since(start), DefaultOpenTimeout, "no lock wait for a directory")
}

func TestJournalEmptyFileBecomesJournal(t *testing.T) {
	// A zero-length file is what os.Create or touch leaves: a new journal,
	// not a damaged one.
	path := filepath.Join(t.TempDir(), "empty.journal")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	j, err := Open(path, nil)
	require.NoError(t, err)
	recs, err := j.Records()
	require.NoError(t, err)
	require.Empty(t, recs)
	require.NoError(t, j.Close())
}

func TestJournalOpenTwiceInProcess(t *testing.T) {
	j, path := testJournal(t)
	rel, err := filepath.Rel(mustGetwd(t), path)
	require.NoError(t, err)
	// Generous timeouts: the answer must come at once, not after them.
	opts := &Options{OpenTimeout: 5 * time.Second}
	for name, open := range map[string]func() (*Journal, error){
		"same path": func() (*Journal, error) { return Open(path, opts) },
		"another spelling": func() (*Journal, error) {
			return Open(filepath.Dir(path)+"/./"+filepath.Base(path), opts)
		},
		"relative path":      func() (*Journal, error) { return Open(rel, opts) },
		"read-only":          func() (*Journal, error) { return OpenReadOnly(path, 5*time.Second) },
		"read-only relative": func() (*Journal, error) { return OpenReadOnly(rel, 5*time.Second) },
	} {
		start := time.Now()
		j2, err := open()
		require.Nil(t, j2, name)
		require.ErrorIs(t, err, journal.ErrLocked, name)
		require.Contains(t, err.Error(), filepath.Base(path), name)
		require.Less(t, time.Since(start), time.Second, "%s: ErrLocked at once", name)
	}
	// Through a symbolic link the in-process guard cannot tell, but the file
	// lock can: ErrLocked after the open timeout, never a deadlock.
	link := filepath.Join(t.TempDir(), "link.journal")
	require.NoError(t, os.Symlink(path, link))
	start := time.Now()
	_, err = Open(link, &Options{OpenTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, journal.ErrLocked)
	require.Contains(t, err.Error(), link)
	require.Less(t, time.Since(start), 2*time.Second)

	// The first handle still works, and once closed the path opens again.
	_, err = j.Records()
	require.NoError(t, err)
	require.NoError(t, j.Close())
	j2, err := Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })
}

func mustGetwd(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	require.NoError(tb, err)
	return wd
}

func TestJournalDoubleCloseKeepsOtherHandlesClaim(t *testing.T) {
	j1, path := testJournal(t)
	require.NoError(t, j1.Close())
	j2, err := Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })

	j1.Close() // a stray second Close of the old handle
	start := time.Now()
	_, err = Open(path, &Options{OpenTimeout: 3 * time.Second})
	require.ErrorIs(t, err, journal.ErrLocked)
	require.Less(t, time.Since(start), time.Second, "the in-process guard must still know j2 holds the file")
	_, err = j2.Records()
	require.NoError(t, err)
}

func TestJournalReadOnlyWhileWriterHolds(t *testing.T) {
	j, path := testJournal(t)
	_, err := OpenReadOnly(path, 100*time.Millisecond)
	require.ErrorIs(t, err, journal.ErrLocked)
	require.Contains(t, err.Error(), path)

	// Once the writer is gone, readers share the file, and cannot write.
	rec := &Record{Key: "k-ro", Method: http.MethodPost, URL: "http://127.0.0.1/p", State: StatePending,
		Created: time.Now(), Updated: time.Now()}
	require.NoError(t, j.insert(rec, true))
	require.NoError(t, j.Close())
	ro, err := OpenReadOnly(path, 100*time.Millisecond)
	require.NoError(t, err)
	defer ro.Close()
	recs, err := ro.Records()
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Error(t, ro.insert(&Record{Key: "k-ro-2", State: StatePending}, true))
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
		j, err := Open(p, nil)
		require.NoError(t, err)
		require.NoError(t, j.Close())
	}
	require.NoError(t, os.Chmod(path, 0))
	require.NoError(t, os.Chmod(control, 0o644))

	if os.Geteuid() != 0 {
		start := time.Now()
		for name, open := range map[string]func() (*Journal, error){
			"Open":         func() (*Journal, error) { return Open(path, nil) },
			"OpenReadOnly": func() (*Journal, error) { return OpenReadOnly(path, 0) },
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
	for _, name := range []string{"Open", "OpenReadOnly"} {
		t.Logf("%s as uid %d: %s", name, nobody, report[name+".err"])
		require.Equal(t, "true", report[name+".permission"], "%s: %s", name, out)
		require.Contains(t, report[name+".err"], path, name)
		elapsed, err := time.ParseDuration(report[name+".elapsed"])
		require.NoError(t, err)
		require.Less(t, elapsed, DefaultOpenTimeout, "%s: no lock wait for a file it cannot open", name)
	}
}

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
	ctl, err := OpenReadOnly(os.Getenv(envControl), 0)
	fmt.Printf("control=%v\n", err)
	if ctl != nil {
		ctl.Close()
	}
	path := os.Getenv(envJournal)
	for name, open := range map[string]func() (*Journal, error){
		"Open":         func() (*Journal, error) { return Open(path, nil) },
		"OpenReadOnly": func() (*Journal, error) { return OpenReadOnly(path, 0) },
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
