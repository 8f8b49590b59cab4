// This file holds "idem journal accept-older": open, on purpose, a journal
// whose newest meta page is damaged as of the commit before it
// (boltjournal.AcceptOlderCommit). journal.go dispatches to it.

package main

import (
	"fmt"

	"github.com/idem-go/idem/journal/boltjournal"
)

func journalAcceptOlder(args []string) error {
	fs := newFlags("journal accept-older", "FILE", `Opens, on purpose, a journal whose newest meta page is damaged as of the commit
its intact meta page names, and commits once so that it opens so from now on.
What the lost commit wrote is gone: reconcile with the server first (to see
what the older commit holds, run accept-older on a copy and list it with
idem journal ls). Needs the file to itself.`)
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if err := checkJournalFile(fs.Name(), file); err != nil {
		return err
	}
	damage, err := boltjournal.AcceptOlderCommit(file, 0)
	if err != nil {
		return openHint(err)
	}
	if damage == nil {
		fmt.Printf("%s: both meta pages are intact; nothing to accept\n", file)
		return nil
	}
	fmt.Printf("%s: meta page %d was damaged (%v); the journal now opens as of commit %d\n",
		file, damage.Page, damage.Err, damage.Commit)
	return nil
}
