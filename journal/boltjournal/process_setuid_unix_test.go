// setuidNobody for helper children that must not be root (process_test.go).

//go:build unix

package boltjournal

import "syscall"

// nobody is the conventional unprivileged uid and gid.
const nobody = 65534

// setuidNobody makes this process (every thread) uid and gid 65534, so a
// root test can see what a file's permissions do to an ordinary user.
func setuidNobody() error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setgid(nobody); err != nil {
		return err
	}
	return syscall.Setuid(nobody)
}
