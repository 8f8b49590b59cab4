// This file holds what every subcommand shares (main.go dispatches): flag
// sets whose -h prints "usage: idem NAME ARGS" to stdout, usage errors that
// exit 2, and the checks that tell a journal file from a missing, empty or
// foreign one before anything opens it.

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// errUsage reports bad flags or arguments; main exits 2.
var errUsage = errors.New("usage")

// usageErr is a usage error with its message; main prints it and a hint.
type usageErr struct{ cmd, msg string }

func (e *usageErr) Error() string        { return e.msg }
func (e *usageErr) Is(target error) bool { return target == errUsage }

// usageError returns a usage error of cmd (e.g. "idem journal ls").
func usageError(cmd, format string, args ...any) error {
	return &usageErr{cmd: cmd, msg: cmd + ": " + fmt.Sprintf(format, args...)}
}

// newFlags returns the flag set of "idem NAME", whose usage prints
// "usage: idem NAME ARGS", desc and the flags.
func newFlags(name, args, desc string) *flag.FlagSet {
	fs := flag.NewFlagSet("idem "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: idem %s %s\n", name, args)
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
// flag.ErrHelp; a bad flag prints the flag package's message and the usage
// to stderr and returns errUsage.
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
		os.Stderr.Write(buf.Bytes())
		return errUsage
	}
	return nil
}

// checkJournalFile refuses, before anything opens it, a path that cannot be
// a journal: missing, a directory, not a regular file, or empty. Opening a
// missing or empty file for writing would make it a new journal, which a
// command asked to read or prune must not do.
func checkJournalFile(cmd, path string) error {
	if isPostgres(path) {
		return fmt.Errorf("%s: works on a journal file only, not on a PostgreSQL journal (%s)", cmd, displayName(path))
	}
	if isView(path) {
		return fmt.Errorf("%s: works on a journal file only, not on a journal view (%s): a view is read-only, for ls, show and stats",
			cmd, displayName(path))
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %s: no such file", cmd, path)
	case err != nil:
		return fmt.Errorf("%s: %w", cmd, err)
	case fi.IsDir():
		return fmt.Errorf("%s: %s is a directory, not a journal file", cmd, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: %s is not a regular file, so not an idem journal", cmd, path)
	case fi.Size() == 0:
		return fmt.Errorf("%s: %s is empty (0 bytes): not an idem journal", cmd, path)
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
