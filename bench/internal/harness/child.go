// This file starts and stops a child process from the parent's side: this
// binary re-executed with a hidden first argument, so that the child's work
// (a server) and the parent's (the load or the client) are measured apart.
// The child answers with one line on stdout and exits when its stdin closes.

package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Child is a running child process. Its methods are safe for concurrent use.
type Child struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stopOnce sync.Once
	stopErr  error
}

// StartChild starts this binary (os.Executable) with args, its stderr this
// process's, and returns it with the first line it prints on stdout, spaces
// trimmed; the rest of its stdout is discarded. If no line comes within
// timeout, or ctx ends first, it kills the child and returns an error.
func StartChild(ctx context.Context, timeout time.Duration, args ...string) (*Child, []byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	c := &Child{cmd: cmd, stdin: stdin}
	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(stdout).ReadBytes('\n')
		line <- bytes.TrimSpace(b)
		io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case b := <-line:
		return c, b, nil
	case <-timer.C:
		c.Stop(0)
		return nil, nil, fmt.Errorf("the child printed no line in %v", timeout)
	case <-ctx.Done():
		c.Stop(0)
		return nil, nil, ctx.Err()
	}
}

// PID is the child's process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Stop closes the child's stdin, which asks it to exit, and waits up to
// grace for it to do so (to clean up), then kills it; with grace 0 it kills
// it at once. It returns how the child ended: nil if it exited with status
// 0 within grace. Later calls return the same.
func (c *Child) Stop(grace time.Duration) error {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		if grace <= 0 {
			c.cmd.Process.Kill()
			c.stopErr = <-done
			return
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case c.stopErr = <-done:
		case <-timer.C:
			c.cmd.Process.Kill()
			c.stopErr = errors.Join(errors.New("the child did not exit in time (killed)"), <-done)
		}
	})
	return c.stopErr
}
