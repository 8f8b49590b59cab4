// limitFileSize, for record_test.go's write-ahead failure child: the Unix side.

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
