// This file holds "idem journal prune": deleting settled, failed and expired records
// past their retention, from a journal file or a PostgreSQL journal (journal.go has the
// command's other read-only subcommands).

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
)

func journalPrune(args []string) error {
	fs := newFlags("journal prune", "[-retention D] [-key-ttl T] [-force] FILE", "Deletes settled, failed and expired records last updated more than D ago;\npending records stay. Refuses a file that is not a journal.")
	retention := fs.Duration("retention", boltjournal.DefaultRetention, "keep records updated more recently than this")
	keyTTL := fs.Duration("key-ttl", idem.DefaultKeyTTL, "the applications' Options.KeyTTL: how long the server keeps a key")
	force := fs.Bool("force", false, "prune with -retention below -key-ttl all the same")
	file, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	if *retention < 0 {
		return usageError(fs.Name(), "-retention must not be negative")
	}
	if *retention < *keyTTL && !*force {
		// The library never keeps a settled record for less (KeepAtLeast).
		return usageError(fs.Name(), "-retention %v is below the key TTL (-key-ttl %v): a call that reuses the operation ID of a pruned record would mint a new key, and the server would act on it again; pass -force to prune anyway",
			*retention, *keyTTL)
	}
	var n int
	if isPostgres(file) {
		n, err = prunePostgres(fs.Name(), file, *retention)
	} else {
		n, err = pruneFile(fs.Name(), file, *retention)
	}
	if err != nil {
		return err
	}
	fmt.Printf("pruned %d record(s) from %s\n", n, displayName(file))
	return nil
}

func pruneFile(cmd, file string, retention time.Duration) (int, error) {
	if err := checkJournalFile(cmd, file); err != nil {
		return 0, err
	}
	j, err := boltjournal.Open(file, &boltjournal.Options{Retention: retention})
	if err != nil {
		return 0, openHint(err)
	}
	defer j.Close()
	return j.Prune(retention)
}

func prunePostgres(cmd, arg string, retention time.Duration) (int, error) {
	t, err := parsePostgres(arg)
	if err != nil {
		return 0, usageError(cmd, "%v", err)
	}
	t.opts.Retention = max(retention, time.Nanosecond) // Open's own pruning must not use a longer one
	pool, j, err := t.open(context.Background(), false)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	defer j.Close()
	return j.Prune(retention)
}
