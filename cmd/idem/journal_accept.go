// This file holds "idem journal accept-older": open, on purpose, a journal
// whose newest meta page is damaged as of the commit before it
// (idem.AcceptOlderCommit). journal.go dispatches to it.

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/idem-go/idem"
)

func journalAcceptOlder(args []string) error {
	fs := flag.NewFlagSet("journal accept-older", flag.ContinueOnError)
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if _, err := os.Stat(file); err != nil {
		return err
	}
	damage, err := idem.AcceptOlderCommit(file, 0)
	if err != nil {
		return lockedHint(err)
	}
	if damage == nil {
		fmt.Printf("%s: both meta pages are intact; nothing to accept\n", file)
		return nil
	}
	fmt.Printf("%s: meta page %d was damaged (%v); the journal now opens as of commit %d\n",
		file, damage.Page, damage.Err, damage.Commit)
	return nil
}
