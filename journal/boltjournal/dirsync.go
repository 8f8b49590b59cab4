// This file makes a journal's directory entry durable (journal.go opens the
// file). bbolt fsyncs the file's data, and fsync(2) of a file does not
// promise that the directory entry naming it has reached the disk: after a
// power loss a new journal, with the write-aheads in it, could be gone.

package boltjournal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// syncDir fsyncs the directory dir. Tests replace it to see it called.
var syncDir = syncDirFS

// syncJournalDir fsyncs the directory holding the journal at abs, on every
// writer Open and before it returns, so before any write-ahead of that
// process. Every Open, not only the one that created the file: an Open that
// created it and died before its sync leaves a file the next Open cannot tell
// from an old one. One fsync of a directory per Open costs next to nothing. A
// file system that cannot fsync a directory (EINVAL, ENOTSUP) is taken at its
// word; any other failure fails Open.
func syncJournalDir(path, abs string) error {
	err := syncDir(filepath.Dir(abs))
	if err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return fmt.Errorf("idem: journal %s: sync its directory: %w", path, err)
}

func syncDirFS(dir string) error {
	if !dirSyncable {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
