// Command idem runs the demo that shows what idem prevents, the same proof at
// scale, the fake flaky payments server standalone, and a journal inspector.
//
//	idem demo    [flags]            plain retries vs idem through faults and SIGKILLs (demo.go)
//	idem chaos   [flags]            exactly-once at scale: 2,000 payments, 30 SIGKILLs (chaos.go)
//	idem serve   [flags]            run the fake payments server on a loopback address (serve.go)
//	idem journal SUBCOMMAND FILE    inspect a journal file, push its pending work, or end it by hand
//	idem version                    the version this binary was built from (also -version, --version, -v)
//
// Like the go command, it exits 2 for a usage error, 1 for a failure, 0 for
// -h and help (printed to stdout), and 130 after Ctrl-C in the demo; every
// error is printed as "idem COMMAND: message". cli.go holds the helpers every
// subcommand parses its flags and files with, and prints errors with.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

const usage = `idem shows and checks idempotent, crash-safe HTTP calls (github.com/idem-go/idem).

usage: idem COMMAND [flags] [arguments]

commands:
  demo [flags]                 the same payments through a plain retrying client and
                               through idem, with faults and SIGKILLs; compare the ledgers
  chaos [flags]                exactly-once at scale, for about a minute
  serve [flags]                run the fake flaky payments server until Ctrl-C or SIGTERM
  journal SUBCOMMAND FILE      inspect a journal, push its pending work, or end it by hand
                               (ls, show, stats, resume, resolve, discard, prune, accept-older)
  version                      print the version this binary was built from (also -v)
  help [COMMAND]               print this, or a command's usage

"idem COMMAND -h" prints a command's usage and flags.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the command line args and returns the exit code.
func run(args []string) int {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		err = inCommand("idem demo", runDemo(rest))
	case "chaos":
		err = inCommand("idem chaos", runChaos(rest))
	case workerCommand:
		err = inCommand("idem "+workerCommand, runWorker(rest))
	case "serve":
		err = inCommand("idem serve", runServe(rest))
	case "journal":
		err = inCommand("idem journal", runJournal(rest))
	case "version", "-version", "--version", "-v":
		err = inCommand("idem version", runVersion(rest))
	case "help":
		if len(rest) == 0 {
			fmt.Print(usage)
			return 0
		}
		return run(append(rest, "-h"))
	case "-h", "-help", "--help":
		fmt.Print(usage)
		return 0
	default:
		if strings.HasPrefix(cmd, "-") { // worded as the flag package words it
			err = usageError("idem", "flag provided but not defined: %s", cmd)
		} else {
			err = usageError("idem", "unknown command %q", cmd)
		}
	}
	return exitStatus(err)
}

// exitStatus prints err, if any, to stderr and returns the exit code for it.
func exitStatus(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errInterrupted):
		return 130 // 128 + SIGINT, as a shell reports it
	case errors.Is(err, errUsage):
		return 2 // the usage is on stderr already
	}
	return printError(err)
}

func runVersion(args []string) error {
	fs := newFlags("version", "", "Prints the version of idem this binary was built from, its VCS revision when\nbuilt from a checkout, and the Go toolchain.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs.Name(), "unexpected arguments %q", fs.Args())
	}
	fmt.Println(versionLine())
	return nil
}

// versionLine reads the build info: the module version (a tag when installed
// with go install ...@version, "(devel)" or a pseudo-version when built in a
// checkout), the VCS revision, and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "idem (no build information) " + runtime.Version()
	}
	line := "idem " + bi.Main.Version
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if rev != "" && !strings.Contains(bi.Main.Version, rev[:min(12, len(rev))]) {
		line += fmt.Sprintf(" (%s%s %s)", rev[:min(12, len(rev))], dirty, at)
	}
	return fmt.Sprintf("%s %s %s/%s", line, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
