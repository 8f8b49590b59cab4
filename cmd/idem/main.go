// Command idem runs the demo that proves exactly-once through crashes, the
// same proof at scale, the fake flaky payments server standalone, and a
// journal inspector.
//
//	idem demo    [flags]            prove exactly-once through SIGKILLs (see demo.go)
//	idem chaos   [flags]            the same at scale: 2,000 payments, 30 SIGKILLs (chaos.go)
//	idem serve   [flags]            run the testserver on a loopback address
//	idem journal ls|show|stats|resume|resolve|discard|prune|accept-older FILE
//	                                inspect a journal file, push its pending work, or end it by hand
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

const usage = `usage:
  idem demo [flags]               prove exactly-once through crashes (idem demo -h)
  idem chaos [flags]              the same at scale, for minutes (idem chaos -h)
  idem serve [flags]              run the fake flaky payments server (idem serve -h)
  idem journal ls|show|stats|resume|resolve|discard|prune|accept-older FILE
                                  inspect a journal, push its pending work, or end it
                                  by hand (idem journal -h)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "demo":
		err = runDemo(args)
	case "chaos":
		err = runChaos(args)
	case workerCommand:
		err = runWorker(args)
	case "serve":
		err = runServe(args)
	case "journal":
		err = runJournal(args)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "idem: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag package has said what was wrong
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "idem") {
			msg = "idem: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

// errUsage reports bad flags, already explained by the flag package.
var errUsage = errors.New("usage")

// parseFlags parses args, turning a bad flag into errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return errUsage
	}
	return err
}
