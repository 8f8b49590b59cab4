// The Unix side of process_test.go's helpers.

//go:build unix

package idem

import "syscall"

// limitFileSize stops this process from growing any file past n bytes
// (RLIMIT_FSIZE): a write past it fails with EFBIG, as on a full disk.
func limitFileSize(n int64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return err
	}
	lim.Cur = uint64(n)
	return syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim)
}
