// This file releases the file lock of a journal whose open failed half-way
// (journal.go); flock_other.go is its counterpart elsewhere.

//go:build unix

package idem

import (
	"os"
	"syscall"
)

// unlockFile drops bbolt's flock on f. Closing f alone is not enough when
// bbolt panicked after mapping the file: the mapping keeps the open file, and
// with it the lock, alive.
func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
