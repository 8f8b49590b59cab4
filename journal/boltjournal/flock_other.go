// This file is flock_unix.go's counterpart where locks are not flock(2):
// closing the file is enough there, and idem checks the file once bbolt has
// opened it, under bbolt's lock.

//go:build !unix

package boltjournal

import (
	"os"
	"time"
)

const lockable = false

func lockFile(*os.File, bool, time.Duration) error { return nil }

func unlockFile(*os.File) {}
