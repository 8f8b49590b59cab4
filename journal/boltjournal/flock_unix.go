// This file takes and releases a journal's file lock around bbolt's own
// (journal.go, meta.go); flock_other.go is its counterpart elsewhere.

//go:build unix

package boltjournal

import (
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// lockable says lockFile takes the lock bbolt takes: idem can then read the
// file before bbolt does with no commit in progress.
const lockable = true

// lockFile takes the flock bbolt takes on a journal, exclusive for a writer
// and shared for a reader, trying every lockPoll until timeout (0: no
// limit), as bbolt does; then berrors.ErrTimeout. A flock belongs to the
// open file, so bbolt's own flock of f succeeds at once, and its close
// releases both.
func lockFile(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err != syscall.EWOULDBLOCK:
			return err
		case timeout > 0 && time.Since(start) > timeout-lockPoll:
			return berrors.ErrTimeout
		}
		time.Sleep(lockPoll)
	}
}

// lockPoll is how often lockFile tries the lock: bbolt's own interval.
const lockPoll = 50 * time.Millisecond

// unlockFile drops bbolt's flock on f. Closing f alone is not enough when
// bbolt panicked after mapping the file: the mapping keeps the open file, and
// with it the lock, alive.
func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
