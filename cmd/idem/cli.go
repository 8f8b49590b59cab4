// This file holds what every subcommand shares (main.go dispatches): flag
// sets whose -h prints "usage: idem NAME ARGS" to stdout, errors printed as
// "idem NAME: message" (usage errors exit 2), and the checks that tell a journal file from a missing, empty or
// foreign one before anything opens it.

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// errUsage reports a usage error whose full usage is on stderr already; main exits 2.
var errUsage = errors.New("usage")

// commandError is an error of one command, which main prints as "CMD: MSG":
// the command path as typed, so every message of the command starts the same.
type commandError struct {
	cmd   string // "idem", "idem demo", "idem journal ls"
	err   error
	usage bool // a usage error: exit 2, with a pointer to "CMD -h"
}

func (e *commandError) Error() string { return e.cmd + ": " + e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// usageError returns a usage error of cmd (e.g. "idem journal ls").
func usageError(cmd, format string, args ...any) error {
	return &commandError{cmd: cmd, err: fmt.Errorf(format, args...), usage: true}
}

// inCommand names cmd in err unless err is nil, -h, a usage already printed,
// or an error that names its command already.
func inCommand(cmd string, err error) error {
	var ce *commandError
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) || errors.As(err, &ce) {
		return err
	}
	return &commandError{cmd: cmd, err: err}
}

// printError prints err on stderr as "CMD: MSG", CMD being "idem" for an
// error no command named, and a usage error's pointer to its usage; it
// returns the exit status, 2 for a usage error and 1 otherwise. The
// library's own "idem: " prefix is dropped: CMD names idem already.
func printError(err error) int {
	var ce *commandError
	if !errors.As(err, &ce) {
		ce = &commandError{cmd: "idem", err: err}
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", ce.cmd, strings.TrimPrefix(ce.err.Error(), "idem: "))
	if ce.usage {
		fmt.Fprintf(os.Stderr, "run '%s -h' for usage\n", ce.cmd)
		return 2
	}
	return 1
}

// newFlags returns the flag set of "idem NAME", whose usage prints
// "usage: idem NAME ARGS", desc and the flags.
func newFlags(name, args, desc string) *flag.FlagSet {
	fs := flag.NewFlagSet("idem "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimSpace("usage: idem "+name+" "+args))
		if desc != "" {
			fmt.Fprintf(fs.Output(), "\n%s\n", desc)
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(fs.Output(), "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args. -h prints the usage to stdout and returns
// flag.ErrHelp; a bad flag returns a usage error with the flag package's own
// message (the one it printed before the usage, which is dropped), so main
// prints that one line and a pointer to -h.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Stdout.Write(buf.Bytes())
		return flag.ErrHelp
	case err != nil:
		return usageError(fs.Name(), "%v", err)
	}
	return nil
}

// checkJournalFile refuses, before anything opens it, a path that cannot be
// a journal: missing, a directory, not a regular file, or empty. Opening a
// missing or empty file for writing would make it a new journal, which a
// command asked to read or prune must not do.
func checkJournalFile(cmd, path string) error {
	if isPostgres(path) {
		return inCommand(cmd, fmt.Errorf("works on a journal file only, not on a PostgreSQL journal (%s)", displayName(path)))
	}
	if isView(path) {
		return inCommand(cmd, fmt.Errorf("works on a journal file only, not on a journal view (%s): a view is read-only, for ls, show and stats",
			displayName(path)))
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return inCommand(cmd, fmt.Errorf("%s: no such file", path))
	case err != nil:
		return inCommand(cmd, err)
	case fi.IsDir():
		return inCommand(cmd, fmt.Errorf("%s is a directory, not a journal file", path))
	case !fi.Mode().IsRegular():
		return inCommand(cmd, fmt.Errorf("%s is not a regular file, so not an idem journal", path))
	case fi.Size() == 0:
		return inCommand(cmd, fmt.Errorf("%s is empty (0 bytes): not an idem journal", path))
	}
	return nil
}

// openHint explains an error opening a journal to an operator.
func openHint(err error) error {
	switch {
	case errors.Is(err, journal.ErrLocked):
		return fmt.Errorf("%w\n(an application has it open; stop it, inspect a copy, or read the view it serves: idem journal ls http://host:port/debug/idem/journal, see package journalhttp)", err)
	case errors.Is(err, boltjournal.ErrNotJournal):
		return err
	case errors.Is(err, journal.ErrCorrupt):
		return fmt.Errorf("%w\n(an idem journal, but damaged: see \"The journal file\" in docs/real-world.md)", err)
	}
	return err
}
