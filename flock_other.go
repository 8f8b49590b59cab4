// This file is flock_unix.go's counterpart where locks are not flock(2):
// closing the file is enough there.

//go:build !unix

package idem

import "os"

func unlockFile(*os.File) {}
