// This file drops a file's pages from the page cache, for the resume figure's
// cold pass.

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// evict asks the kernel to drop the file's cached pages. They are clean (the
// file was fsynced), so the kernel can, and the next read goes to the disk.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
