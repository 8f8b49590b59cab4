// This file holds serve's -pidfile: this process's ID written for a script
// to stop it by, never over the file of a server still running, and removed
// at exit only while it still holds this process's ID.

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// writePidfile writes this process's ID to path, unless path names another
// process that is still running. remove deletes the file if it still
// holds this process's ID.
func writePidfile(path string) (remove func(), err error) {
	if data, err := os.ReadFile(path); err == nil {
		if pid, err := strconv.Atoi(string(bytes.TrimSpace(data))); err == nil && pid != os.Getpid() && alive(pid) {
			return nil, fmt.Errorf("%s names process %d, which is still running (stop it first, or choose another file)", path, pid)
		}
	}
	own := fmt.Appendf(nil, "%d\n", os.Getpid())
	if err := os.WriteFile(path, own, 0o644); err != nil {
		return nil, err
	}
	return func() {
		if data, err := os.ReadFile(path); err == nil && bytes.Equal(data, own) {
			os.Remove(path)
		}
	}, nil
}

// alive reports whether a process pid exists (signal 0 checks without
// sending; where that is unsupported, it reports false).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || err == syscall.EPERM
}
