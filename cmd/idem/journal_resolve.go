// This file holds "idem journal resolve" and "idem journal discard": an
// operator ends by hand an operation that nothing else will finish, after
// reconciling it with the server (Journal.Resolve, Journal.Discard). Both
// open the journal for writing, so they refuse while an application holds
// the file.

package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// refFlags are the -op and -key flags that name one operation.
type refFlags struct{ op, key *string }

func addRefFlags(fs *flag.FlagSet) refFlags {
	return refFlags{
		op:  fs.String("op", "", "the operation's `ID` (WithOperationID)"),
		key: fs.String("key", "", "the operation's idempotency `key`, as journal ls shows it"),
	}
}

func (f refFlags) ref(cmd string) (journal.Name, error) {
	if (*f.op == "") == (*f.key == "") {
		return journal.Name{}, usageError(cmd, "name the operation with -op ID or -key K (one of them)")
	}
	return journal.Name{OperationID: *f.op, Key: *f.key}, nil
}

func journalResolve(args []string) error {
	fs := newFlags("journal resolve", "(-op ID | -key K) -status N FILE", "Marks a pending or expired operation settled with status N, once you found its\noutcome on the server. Opens the file for writing.")
	refs := addRefFlags(fs)
	status := fs.Int("status", 0, "the final `status` the server gave the operation (200-599), as reconciled")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	ref, err := refs.ref(fs.Name())
	if err != nil {
		return err
	}
	if *status < 200 || *status > 599 {
		return usageError(fs.Name(), "-status must be the final status found on the server, 200-599")
	}
	return byHand(fs.Name(), file, func(j *boltjournal.Journal) (*idem.Record, error) { return j.Resolve(ref, *status) })
}

func journalDiscard(args []string) error {
	fs := newFlags("journal discard", "(-op ID | -key K) [-reason R] FILE", "Gives a pending operation up for good: expired, never sent again. Opens the file\nfor writing.")
	refs := addRefFlags(fs)
	reason := fs.String("reason", "", "why, kept in the record's last_error")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	ref, err := refs.ref(fs.Name())
	if err != nil {
		return err
	}
	return byHand(fs.Name(), file, func(j *boltjournal.Journal) (*idem.Record, error) { return j.Discard(ref, *reason) })
}

// byHand opens the journal for writing, applies change and says what it did.
func byHand(cmd, file string, change func(*boltjournal.Journal) (*idem.Record, error)) error {
	if err := checkJournalFile(cmd, file); err != nil {
		return err
	}
	j, err := boltjournal.Open(file, &boltjournal.Options{OpenTimeout: time.Second})
	if err != nil {
		return openHint(err)
	}
	defer j.Close()
	rec, err := change(j)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (id %d, key %s)", rec.State, orDash(rec.OperationID), boltjournal.RecordID(rec), rec.Key)
	if rec.Status != 0 && rec.State == idem.StateSettled {
		fmt.Printf(" with status %d", rec.Status)
	}
	fmt.Println()
	return j.Close()
}
