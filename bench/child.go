// This file starts and stops the child process that runs the loopback server
// (serve.go). The child is this binary re-executed with the hidden first
// argument -serve, so the parent measures client work only.

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

const serveArg = "-serve"

// isServeChild reports whether this process is the server child. It is checked
// before flag parsing, in main and in the test binary's TestMain.
func isServeChild() bool { return len(os.Args) > 1 && os.Args[1] == serveArg }

// child is a running server process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string // 127.0.0.1:port
}

// startChild starts the server, which sleeps delay before answering each
// /payments request.
func startChild(delay time.Duration) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("server child: %w", err)
	}
	cmd := exec.Command(exe, serveArg, delay.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("server child: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case c.addr = <-line:
	case <-time.After(10 * time.Second):
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil || host != "127.0.0.1" {
		c.stop()
		return nil, fmt.Errorf("server child printed %q, want 127.0.0.1:port", c.addr)
	}
	return c, nil
}

func (c *child) url(path string) string { return "http://" + c.addr + path }

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop ends the child: closing its stdin asks it to exit; Kill makes sure.
func (c *child) stop() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}
