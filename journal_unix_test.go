// Tests for opening a journal at a bad path (journal.go): a directory, a named
// pipe, a missing parent, an unwritable directory or file, a read-only file
// system. Each open fails at once (no lock wait, no hang) with an error that
// names the path and matches the file system's error, and leaves nothing
// behind. Unix only: the cases are made of permission bits, mkfifo, mounts
// and a child that drops root (setuidNobody).

//go:build unix

package idem

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

func init() { helperModes["badinput-open"] = helperBadInputOpen }

// badOpenTimeout is long on purpose: the answer must come well before it.
const badOpenTimeout = 5 * time.Second

// openEveryWay tries each way to open the journal at path and reports, per
// way, the error, whether it matches target, and how long the open took.
// The unprivileged child of a root test prints the same report.
func openEveryWay(path string, target error) map[string]string {
	opts := &Options{Journal: boltjournal.Options{OpenTimeout: badOpenTimeout}}
	report := make(map[string]string)
	for name, open := range map[string]func() (io.Closer, error){
		"Open":                func() (io.Closer, error) { return nilIfError(Open(path, opts)) },
		"OpenJournal":         func() (io.Closer, error) { return nilIfError(boltjournal.Open(path, &opts.Journal)) },
		"OpenJournalReadOnly": func() (io.Closer, error) { return nilIfError(boltjournal.OpenReadOnly(path, badOpenTimeout)) },
	} {
		start := time.Now()
		c, err := open()
		report[name+".elapsed"] = time.Since(start).String()
		report[name+".match"] = fmt.Sprint(errors.Is(err, target))
		report[name+".err"] = strings.ReplaceAll(fmt.Sprint(err), "\n", " ")
		if c != nil {
			c.Close()
		}
	}
	return report
}

// nilIfError turns a failed open's typed nil into a nil io.Closer.
func nilIfError[T io.Closer](c T, err error) (io.Closer, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// requireRefused checks the report of openEveryWay for each named way: an
// error that matches, names the path, and came at once.
func requireRefused(t *testing.T, report map[string]string, path string, ways ...string) {
	t.Helper()
	for _, name := range ways {
		t.Logf("%s: %s", name, report[name+".err"])
		require.Equal(t, "true", report[name+".match"], "%s: %s", name, report[name+".err"])
		require.Contains(t, report[name+".err"], path, name)
		elapsed, err := time.ParseDuration(report[name+".elapsed"])
		require.NoError(t, err, name)
		require.Less(t, elapsed, time.Second, "%s: no lock wait, no hang", name)
	}
}

// helperBadInputOpen drops root, then runs openEveryWay on IDEM_JOURNAL,
// matching fs.ErrPermission.
func helperBadInputOpen() int {
	if err := setuidNobody(); err != nil {
		fmt.Printf("setuid=%v\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	fmt.Println("setuid=ok")
	for k, v := range openEveryWay(os.Getenv(envJournal), fs.ErrPermission) {
		fmt.Printf("%s=%s\n", k, v)
	}
	return 0
}

// openAsUser runs openEveryWay on path as an ordinary user: here if this
// process is not root, else in a child that drops to uid 65534 (root's
// permission bits do not bind).
func openAsUser(t *testing.T, path string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		report, _ := bounded(t, func() (map[string]string, error) { return openEveryWay(path, fs.ErrPermission), nil })
		return report
	}
	report, out := runHelper(t, "badinput-open", envJournal+"="+path)
	if report["setuid"] != "ok" {
		t.Skipf("running as root, and the child cannot drop to uid %d to feel the permission bits: %s", nobody, out)
	}
	return report
}

func TestBadInputJournalPath(t *testing.T) {
	t.Run("a directory", func(t *testing.T) {
		dir := t.TempDir()
		report := openEveryWay(dir, syscall.EISDIR)
		requireRefused(t, report, dir, "Open", "OpenJournal", "OpenJournalReadOnly")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "nothing created in it")
	})

	t.Run("a named pipe", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "fifo.journal")
		require.NoError(t, syscall.Mkfifo(path, 0o600))
		// A reader's open of a pipe would block until a writer came along.
		report, _ := bounded(t, func() (map[string]string, error) { return openEveryWay(path, journal.ErrCorrupt), nil })
		requireRefused(t, report, path, "Open", "OpenJournal", "OpenJournalReadOnly")
	})

	t.Run("a missing parent directory", func(t *testing.T) {
		parent := filepath.Join(t.TempDir(), "no-such-dir")
		path := filepath.Join(parent, "idem.journal")
		report := openEveryWay(path, fs.ErrNotExist)
		requireRefused(t, report, path, "Open", "OpenJournal", "OpenJournalReadOnly")
		_, err := os.Stat(parent)
		require.ErrorIs(t, err, fs.ErrNotExist, "no directory created")
	})

	// The next two need a directory an unprivileged child can reach.
	shared := func(t *testing.T) string {
		dir, err := os.MkdirTemp("", "idem-badinput-")
		require.NoError(t, err)
		t.Cleanup(func() { os.Chmod(dir, 0o700); os.RemoveAll(dir) })
		require.NoError(t, os.Chmod(dir, 0o755))
		return dir
	}

	t.Run("an unwritable directory", func(t *testing.T) {
		dir := filepath.Join(shared(t), "read-only-dir")
		require.NoError(t, os.Mkdir(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		path := filepath.Join(dir, "idem.journal")
		report := openAsUser(t, path)
		requireRefused(t, report, path, "Open", "OpenJournal")
		// A reader does not create the file: it finds none.
		require.Contains(t, report["OpenJournalReadOnly.err"], "no such file", report["OpenJournalReadOnly.err"])
		_, err := os.Stat(path)
		require.ErrorIs(t, err, fs.ErrNotExist, "no journal created")
	})

	t.Run("an unwritable file", func(t *testing.T) {
		path := filepath.Join(shared(t), "read-only.journal")
		j, err := boltjournal.Open(path, nil)
		require.NoError(t, err)
		require.NoError(t, j.Close())
		require.NoError(t, os.Chmod(path, 0o444))
		before, err := os.ReadFile(path)
		require.NoError(t, err)

		report := openAsUser(t, path)
		requireRefused(t, report, path, "Open", "OpenJournal")
		require.Equal(t, "<nil>", report["OpenJournalReadOnly.err"], "a reader may open a file it may read")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, before, after, "the file is untouched")
	})

	t.Run("a read-only file system", func(t *testing.T) {
		dir := t.TempDir()
		if err := mountTmpfs(t, dir, 1<<20); err != nil {
			t.Skipf("cannot mount a file system to make read-only (%v); TestWriteAheadFailureReadOnlyFileSystem has the same need", err)
		}
		existing, fresh := filepath.Join(dir, "idem.journal"), filepath.Join(dir, "new.journal")
		j, err := boltjournal.Open(existing, nil)
		require.NoError(t, err)
		require.NoError(t, j.Close())
		require.NoError(t, remountReadOnly(dir))

		report := openEveryWay(existing, syscall.EROFS)
		requireRefused(t, report, existing, "Open", "OpenJournal")
		require.Equal(t, "<nil>", report["OpenJournalReadOnly.err"], "a reader may open it (idem journal ls)")

		report = openEveryWay(fresh, syscall.EROFS)
		requireRefused(t, report, fresh, "Open", "OpenJournal")
		_, err = os.Stat(fresh)
		require.ErrorIs(t, err, fs.ErrNotExist, "no journal created")
	})
}

// nobody is the conventional unprivileged uid and gid.
const nobody = 65534

// setuidNobody makes this process (every thread) uid and gid 65534, so a
// root test can see what a file's permissions do to an ordinary user.
func setuidNobody() error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setgid(nobody); err != nil {
		return err
	}
	return syscall.Setuid(nobody)
}
