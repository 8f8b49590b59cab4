// This file opens a journal's bbolt file (journal.go): how much it maps and
// grows, its file lock, and the errors of a file that is not a journal.

package boltjournal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// initialMmapSize is the address space a writer maps up front (the file
// itself grows only as it fills, growStep at a time). When a commit outgrows
// the mapping, bbolt remaps the file, and first copies every key and value
// the transaction holds onto the heap (node.dereference): a commit of an
// 8 MiB body then held three copies of it. Mapping 1 GiB from the start
// leaves remaps to journals past 1 GiB, and commits no longer wait for
// readers to let go of the old mapping. The mapping is read-only and
// file-backed: it takes address space, not memory. On Windows bbolt would
// grow the file itself to the mapping's size, and a 32-bit address space is
// too small to spare, so there it is left to bbolt.
var initialMmapSize = func() int {
	if runtime.GOOS == "windows" || strconv.IntSize < 64 {
		return 0
	}
	return 1 << 30
}()

// growStep is how much room bbolt adds past what a commit needs when the file
// must grow (its DB.AllocSize; bbolt's default of 16 MiB would make a new
// journal a 16 MiB file once mapped as above). Each growth costs a truncate
// and an fsync, so a growing journal pays one per MiB written.
const growStep = 1 << 20

func openBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	return openBoltWith(path, timeout, readOnly, func(f *os.File) error { return checkMeta(path, f) })
}

// openBoltWith is openBolt with check run on the file before bbolt reads it,
// with bbolt's lock held (meta.go).
func openBoltWith(path string, timeout time.Duration, readOnly bool, check func(*os.File) error) (db *bolt.DB, err error) {
	// Only a regular file can be a journal. A directory gets EISDIR, which a
	// reader's open would not say, and a named pipe would block that open
	// until a writer came along.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, fmt.Errorf("idem: journal %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR})
		}
		return nil, fmt.Errorf("%w: %s is not a regular file (%v)", journal.ErrCorrupt, path, fi.Mode().Type())
	}
	var file *os.File
	defer func() {
		// bbolt may panic on a damaged file instead of returning an error. It
		// then never returns the DB, so release its file lock and file here,
		// or the next open would wait for a lock no one holds. (The mapping of
		// the damaged file stays.)
		if p := recover(); p != nil {
			if file != nil {
				unlockFile(file)
				file.Close()
			}
			db, err = nil, fmt.Errorf("%w: %s: %v", journal.ErrCorrupt, path, p)
		}
	}()
	// A truncated file makes bbolt read mapped pages past its end: SIGBUS,
	// which kills the process unless the runtime turns it into a panic.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	opts := &bolt.Options{Timeout: timeout, ReadOnly: readOnly,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil && !readOnly {
				privateIfEmpty(f)
			}
			if err != nil || !lockable {
				file = f
				return f, err
			}
			// bbolt's own flock of f then succeeds at once.
			if err := lockFile(f, !readOnly, timeout); err != nil {
				f.Close()
				return nil, err
			}
			if err := check(f); err != nil {
				unlockFile(f)
				f.Close()
				return nil, err
			}
			file = f
			return f, nil
		}}
	if !readOnly {
		opts.InitialMmapSize = initialMmapSize
	}
	db, err = bolt.Open(path, 0o600, opts)
	if db != nil {
		db.AllocSize = growStep
	}
	if err == nil && !lockable { // bbolt holds the lock now
		if err = check(file); err != nil {
			db.Close()
			return nil, err
		}
	}
	var pathErr *fs.PathError
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, journal.ErrCorrupt):
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s (waited %v)", journal.ErrLocked, path, timeout)
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("idem: journal %s: %w", path, err)
	default:
		return nil, fmt.Errorf("%w: %s: %w", journal.ErrCorrupt, path, err)
	}
}

// privateIfEmpty gives an empty regular file that is about to become a
// journal the mode bbolt creates a new one with, 0600, whatever mode it was
// made with (by touch, or a configuration tool): the journal holds request
// bodies. A file that holds a journal already keeps its owner's choice, and
// so does one whose mode this process may not change (another user's, or on
// a file system without modes): opening it works as it did before.
func privateIfEmpty(f *os.File) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 0 || fi.Mode().Perm() == 0o600 {
		return
	}
	f.Chmod(0o600) // best effort, as above
}
