// The command behaves like a Go tool: a table of invocations of the built
// binary, each with its exit code (0 for -h and help, 2 for a usage error, 1
// for a failure), the stream each message goes to, and the message; and no
// command changes a file that is not a journal.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// runStreams runs the binary and returns its stdout, its stderr and its exit code.
func runStreams(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "idem %v did not finish", args)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCommandLineConventions(t *testing.T) {
	bin := idemBinary(t)
	dir := t.TempDir()
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	empty := file("empty", nil)
	text := file("notes.txt", []byte("not a journal\n"))
	missing := filepath.Join(dir, "missing.journal")
	corrupt := corruptJournal(t, dir)
	journal := journalWithRecords(t)

	const (
		out  = iota // the message goes to stdout, stderr is empty
		errs        // the message goes to stderr, stdout is empty
	)
	for _, tc := range []struct {
		args   []string
		code   int
		stream int
		says   string
	}{
		{nil, 2, errs, "usage: idem COMMAND"},
		{[]string{"help"}, 0, out, "usage: idem COMMAND"},
		{[]string{"-h"}, 0, out, "usage: idem COMMAND"},
		{[]string{"--help"}, 0, out, "usage: idem COMMAND"},
		{[]string{"help", "demo"}, 0, out, "usage: idem demo [flags]"},
		{[]string{"help", "journal"}, 0, out, "idem journal ls"},
		{[]string{"nope"}, 2, errs, `unknown command "nope"`},
		{[]string{"version"}, 0, out, "idem "},
		{[]string{"-v"}, 0, out, "idem "},
		{[]string{"-version"}, 0, out, "idem "},
		{[]string{"--version"}, 0, out, "idem "},
		{[]string{"-bogus"}, 2, errs, "flag provided but not defined: -bogus"},
		{[]string{"version", "-h"}, 0, out, "usage: idem version"},
		{[]string{"version", "x"}, 2, errs, "unexpected arguments"},
		{[]string{"demo", "-h"}, 0, out, "-compare"},
		{[]string{"demo", "-n", "x"}, 2, errs, `invalid value "x" for flag -n`},
		{[]string{"demo", "-n", "0"}, 2, errs, "-n and -concurrency must be >= 1"},
		{[]string{"demo", "-faults", "bogus=1"}, 2, errs, "-faults"},
		{[]string{"demo", "extra"}, 2, errs, "unexpected arguments"},
		{[]string{"demo", "-journal", journal}, 2, errs, "already exists; give a new path"},
		{[]string{"chaos", "-h"}, 0, out, "usage: idem chaos [flags]"},
		{[]string{"serve", "-h"}, 0, out, "-pidfile"},
		{[]string{"serve", "-faults", "bogus=1"}, 2, errs, "-faults"},
		{[]string{"serve", "extra"}, 2, errs, "unexpected arguments"},
		{[]string{"journal"}, 2, errs, "idem journal ls"},
		{[]string{"journal", "-h"}, 0, out, "idem journal ls"},
		{[]string{"journal", "help", "show"}, 0, out, "usage: idem journal show FILE ID|OPID|KEY"},
		{[]string{"journal", "nope"}, 2, errs, `unknown subcommand "nope"`},
		{[]string{"journal", "-bogus"}, 2, errs, "flag provided but not defined: -bogus"},
		{[]string{"journal", "ls", "-help"}, 0, out, "usage: idem journal ls"},
		{[]string{"journal", "ls", "-h"}, 0, out, "usage: idem journal ls [-state S] [-older-than D] [-op ID] [-json] FILE"},
		{[]string{"journal", "show", "-h"}, 0, out, "usage: idem journal show FILE ID|OPID|KEY"},
		{[]string{"journal", "stats", "-h"}, 0, out, "usage: idem journal stats [-json] FILE"},
		{[]string{"journal", "resume", "-h"}, 0, out, "usage: idem journal resume [-H 'Name: value']..."},
		{[]string{"journal", "resolve", "-h"}, 0, out, "usage: idem journal resolve (-op ID | -key K) -status N FILE"},
		{[]string{"journal", "discard", "-h"}, 0, out, "usage: idem journal discard (-op ID | -key K) [-reason R] FILE"},
		{[]string{"journal", "prune", "-h"}, 0, out, "usage: idem journal prune [-retention D] [-key-ttl T] [-force] FILE"},
		{[]string{"journal", "prune", "-retention", "1h", journal}, 2, errs, "below the key TTL (-key-ttl 24h0m0s)"},
		{[]string{"journal", "prune", "-retention", "48h", "-key-ttl", "72h", journal}, 2, errs, "below the key TTL (-key-ttl 72h0m0s)"},
		{[]string{"journal", "accept-older", "-h"}, 0, out, "usage: idem journal accept-older FILE"},
		{[]string{"journal", "ls"}, 2, errs, "want one FILE"},
		{[]string{"journal", "ls", "-state", "done", journal}, 2, errs, `unknown state "done"`},
		{[]string{"journal", "ls", "-bogus", journal}, 2, errs, "flag provided but not defined: -bogus"},
		{[]string{"journal", "stats", journal, "-json=maybe"}, 2, errs, `invalid boolean value "maybe" for -json`},
		{[]string{"serve", "-addr"}, 2, errs, "flag needs an argument: -addr"},
		{[]string{"journal", "show", journal}, 2, errs, "want FILE and an ID"},
		{[]string{"journal", "show", journal, "order-9/charge"}, 1, errs, `no operation "order-9/charge"`},
		{[]string{"journal", "ls", missing}, 1, errs, missing + ": no such file"},
		{[]string{"journal", "ls", dir}, 1, errs, dir + " is a directory, not a journal file"},
		{[]string{"journal", "ls", empty}, 1, errs, empty + " is empty (0 bytes): not an idem journal"},
		{[]string{"journal", "stats", empty}, 1, errs, "not an idem journal"},
		{[]string{"journal", "prune", empty}, 1, errs, "not an idem journal"},
		{[]string{"journal", "resume", empty}, 1, errs, "not an idem journal"},
		{[]string{"journal", "ls", text}, 1, errs, text + " is not an idem journal"},
		{[]string{"journal", "prune", text}, 1, errs, text + " is not an idem journal"},
		{[]string{"journal", "accept-older", text}, 1, errs, text + " is not an idem journal"},
		{[]string{"journal", "ls", corrupt}, 1, errs, "journal corrupt"},
		{[]string{"journal", "prune", corrupt}, 1, errs, "an idem journal, but damaged"},
		{[]string{"journal", "ls", journal}, 0, out, "2 record(s)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runStreams(t, bin, tc.args...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if tc.stream == out {
				require.Contains(t, stdout, tc.says)
				require.Empty(t, stderr)
			} else {
				require.Contains(t, stderr, tc.says)
				require.Empty(t, stdout)
				if len(tc.args) == 0 || strings.Join(tc.args, " ") == "journal" {
					return // a missing command prints the full usage
				}
				path := commandPath(tc.args)
				require.True(t, strings.HasPrefix(stderr, path+": "), "an error starts with the command path %q: %s", path, stderr)
				require.NotContains(t, stderr, ": idem: ", "one prefix, not the library's too")
				if tc.code == 2 {
					require.Equal(t, []string{"run '" + path + " -h' for usage", ""}, strings.Split(stderr, "\n")[1:],
						"a usage error is one line and a pointer to the usage")
				}
				if tc.code == 1 {
					if strings.Contains(tc.says, "not an idem journal") {
						require.NotContains(t, stderr, "corrupt", "a file that is not a journal is not a corrupt journal")
					}
				}
			}
		})
	}

	// Nothing above created or changed a file that is not a journal.
	for p, want := range map[string]string{empty: "", text: "not a journal\n"} {
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, want, string(got), p)
	}
	_, err := os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// commandPath is the command path, as typed, that an error of "idem args..."
// starts with: "idem", "idem demo", "idem journal ls".
func commandPath(args []string) string {
	if len(args) == 0 || !slices.Contains([]string{"demo", "chaos", "serve", "journal", "version"}, args[0]) {
		return "idem"
	}
	path := "idem " + args[0]
	subs := []string{"ls", "show", "stats", "resume", "resolve", "discard", "prune", "accept-older"}
	if args[0] == "journal" && len(args) > 1 && slices.Contains(subs, args[1]) {
		path += " " + args[1]
	}
	return path
}

// A usage error prints exactly its message and where the usage is, and
// -v, -version and --version print what idem version prints.
func TestUsageErrorsAndVersionFlags(t *testing.T) {
	bin := idemBinary(t)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"journal", "ls", "-bogus"}, "idem journal ls: flag provided but not defined: -bogus\nrun 'idem journal ls -h' for usage\n"},
		{[]string{"journal", "ls", "-bogus", "-h"}, "idem journal ls: flag provided but not defined: -bogus\nrun 'idem journal ls -h' for usage\n"},
		{[]string{"bogus"}, "idem: unknown command \"bogus\"\nrun 'idem -h' for usage\n"},
		{[]string{"-bogus"}, "idem: flag provided but not defined: -bogus\nrun 'idem -h' for usage\n"},
		{[]string{"journal", "bogus"}, "idem journal: unknown subcommand \"bogus\"\nrun 'idem journal -h' for usage\n"},
		{[]string{"demo", "-n", "x"}, "idem demo: invalid value \"x\" for flag -n: parse error\nrun 'idem demo -h' for usage\n"},
		{[]string{"-v", "x"}, "idem version: unexpected arguments [\"x\"]\nrun 'idem version -h' for usage\n"},
	} {
		stdout, stderr, code := runStreams(t, bin, tc.args...)
		require.Equal(t, 2, code, "idem %v", tc.args)
		require.Equal(t, tc.stderr, stderr, "idem %v", tc.args)
		require.Empty(t, stdout, "idem %v", tc.args)
	}

	version, stderr, code := runStreams(t, bin, "version")
	require.Zero(t, code, stderr)
	require.Regexp(t, `^idem \S+ .*go1\.\S+ \S+/\S+\n$`, version)
	for _, flag := range []string{"-v", "-version", "--version"} {
		stdout, stderr, code := runStreams(t, bin, flag)
		require.Zero(t, code, stderr)
		require.Empty(t, stderr)
		require.Equal(t, version, stdout, "idem %s prints what idem version prints", flag)
	}
	stdout, _, code := runStreams(t, bin, "-v", "-h")
	require.Zero(t, code)
	require.Equal(t, "usage: idem version\n", strings.SplitAfter(stdout, "\n")[0])
}

// corruptJournal writes a journal whose two meta pages both fail their checksums.
func corruptJournal(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "corrupt.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, page := range []int{0, os.Getpagesize()} {
		data[page+16+20] ^= 0xff // in the meta page's root bucket: its checksum fails
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// serve stops on SIGINT and on SIGTERM, exiting 0 with its ledger, and its
// -pidfile names the process to signal and is gone afterwards.
func TestServeStopsCleanlyOnSignals(t *testing.T) {
	bin := idemBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "serve.pid")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-pidfile", pidfile)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill() })
			var pid []byte
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(pidfile)
				pid = b
				return err == nil && len(b) > 0
			}, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, fmt.Sprintf("%d\n", cmd.Process.Pid), string(pid), "the pidfile names the server's own process")
			require.NoError(t, cmd.Process.Signal(sig))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				require.NoError(t, err, "stderr: %s", stderr.String())
			case <-time.After(15 * time.Second):
				t.Fatal("serve did not stop")
			}
			require.Regexp(t, `^http://127\.0\.0\.1:\d+\n`, stdout.String())
			require.Contains(t, stdout.String(), "requests received")
			require.Contains(t, stdout.String(), "faults injected")
			_, err := os.Stat(pidfile)
			require.ErrorIs(t, err, os.ErrNotExist, "the pidfile is removed on exit")
		})
	}
}

// Ctrl-C in the demo prints the summary so far, removes the temporary
// journal, and exits 130.
func TestDemoInterruptPrintsSummaryAndCleansUp(t *testing.T) {
	bin := idemBinary(t)
	tmp := t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "demo", "-n", "100", "-kill-within", "5s")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	require.Eventually(t, func() bool {
		entries, _ := os.ReadDir(tmp)
		return len(entries) > 0 // the demo's temporary directory exists
	}, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // some payments under way
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		require.Equal(t, 130, ee.ExitCode(), "stderr: %s", stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("the demo did not stop on SIGINT")
	}
	require.Contains(t, stdout.String(), "interrupted after")
	require.Contains(t, stdout.String(), "the summary so far")
	require.Contains(t, stdout.String(), "made exactly once")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "the temporary journal and its directory are removed")
}

// serve -ignore-keys is a provider that ignores idempotency keys: one key charges twice,
// and the look-up by reference lists both payments.
func TestServeIgnoreKeys(t *testing.T) {
	bin := idemBinary(t)
	var stdout lockedBuffer
	cmd := exec.Command(bin, "serve", "-addr", "127.0.0.1:0", "-ignore-keys")
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var base string
	require.Eventually(t, func() bool {
		line, _, ok := strings.Cut(stdout.String(), "\n")
		base = line
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, base+"/payments", strings.NewReader(`{"amount":1250,"currency":"eur","reference":"order-1"}`))
		req.Header.Set("Idempotency-Key", "k1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	resp, err := http.Get(base + "/payments?reference=order-1")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Data, 2, "one key, two charges")
}

// lockedBuffer is a bytes.Buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
