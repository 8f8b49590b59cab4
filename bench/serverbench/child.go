// This file starts and stops the server child from the parent's side. The
// child is this binary re-executed with the hidden first argument childArg and
// its childConfig as JSON; it answers with one JSON line (childInfo) on
// stdout, and stops, cleaning up its keys and schema, when its stdin closes.

package serverbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

const childArg = "-serverbench-child"

// startTimeout bounds the child's start: opening the stores includes
// pgstore's migration.
const startTimeout = time.Minute

// stopTimeout bounds the child's clean-up after its stdin closed: deleting
// the run's Redis keys and dropping its schema.
const stopTimeout = 2 * time.Minute

// IsChild reports whether this process was started as the server child; the
// bench's main (and its TestMain) call it before parsing flags and then run
// ServeChild instead.
func IsChild() bool { return len(os.Args) > 1 && os.Args[1] == childArg }

// childInfo is the child's first line on stdout.
type childInfo struct {
	Addr        string `json:"addr,omitempty"`         // 127.0.0.1:port
	RedisPrefix string `json:"redis_prefix,omitempty"` // every key of the run starts with it
	PGSchema    string `json:"pg_schema,omitempty"`    // the run's schema, dropped at the end
	Error       string `json:"error,omitempty"`        // why the child could not start
}

// child is a running server child.
type child struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	info     childInfo
	stopOnce sync.Once
	stopErr  error
}

func startChild(ctx context.Context, cc childConfig) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("serverbench: server child: %w", err)
	}
	arg, err := json.Marshal(cc)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, childArg, string(arg))
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
		return nil, fmt.Errorf("serverbench: server child: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(stdout).ReadBytes('\n')
		line <- b
		io.Copy(io.Discard, stdout)
	}()
	var b []byte
	select {
	case b = <-line:
	case <-time.After(startTimeout):
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	switch err := json.Unmarshal(b, &c.info); {
	case err != nil || c.info.Error == "" && c.info.Addr == "":
		c.stop()
		return nil, fmt.Errorf("serverbench: the server child printed %q, want its address as JSON", b)
	case c.info.Error != "":
		c.stop()
		return nil, fmt.Errorf("serverbench: server child: %s", c.info.Error)
	}
	return c, nil
}

func (c *child) url(path string) string { return "http://" + c.info.Addr + path }

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the child to exit by closing its stdin and waits for it to clean
// up, killing it after stopTimeout. It returns the child's failure, if any;
// calling it again returns the same.
func (c *child) stop() error {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- c.cmd.Wait() }()
		select {
		case c.stopErr = <-done:
		case <-time.After(stopTimeout):
			c.cmd.Process.Kill()
			c.stopErr = errors.Join(errors.New("serverbench: the server child did not exit in time (killed)"), <-done)
		}
	})
	return c.stopErr
}
