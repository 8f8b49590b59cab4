// Small file systems for the journal to fail on (record_test.go's write-ahead
// failures, journal_unix_test.go's bad paths): a tmpfs of a given size that
// can be remounted read-only. Linux, as root, only.

//go:build linux

package idem

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes on dir, unmounted at the end of
// the test (after every later Cleanup, so close files in those). It fails
// unless the process may mount: root, and not in a restricted container.
func mountTmpfs(tb testing.TB, dir string, size int) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (euid %d)", os.Geteuid())
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return nil
}

// remountReadOnly makes the file system mounted on dir read-only.
func remountReadOnly(dir string) error {
	return syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, "")
}
