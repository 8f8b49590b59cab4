// This file is the root's side of storage: Open, which opens the embedded
// bbolt journal (package journal/boltjournal, the only bbolt importer) and
// returns a Client over it, and the Client's way to that journal: to read it,
// or to end an operation by hand. Any other journal.Store goes to
// NewTransport.

package idem

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
)

// Open opens (or creates, mode 0600) the journal file at path with
// opts.Journal, prunes records older than its Retention (never below
// KeyTTL), and returns a Client that journals through it. It fails with
// journal.ErrLocked if another process holds the file, journal.ErrCorrupt if
// the file is not a journal (a *boltjournal.MetaPageError if it would open
// one commit older), ErrInvalidOptions for invalid Options (or,
// without Journal.Encryption, for a journal once opened with it), or the
// file system's error (naming the path) for a path it cannot open for
// writing.
func Open(path string, opts *Options) (*Client, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	jopts := cfg.Journal
	jopts.Retention = max(cmp.Or(jopts.Retention, boltjournal.DefaultRetention), cfg.KeyTTL)
	j, err := boltjournal.Open(path, &jopts)
	if err != nil {
		return nil, err
	}
	if err := j.Writable(); err != nil {
		// A Client is for making calls, and every new one would be refused.
		return nil, errors.Join(err, j.Close())
	}
	var topts Options
	if opts != nil {
		topts = *opts
	}
	topts.Journal = boltjournal.Options{} // the journal's alone, used above
	t, err := NewTransport(j, &topts)
	if err == nil {
		_, err = j.Prune(jopts.Retention)
	}
	if err != nil {
		return nil, errors.Join(err, j.Close())
	}
	return &Client{journal: j, transport: t, http: &http.Client{Transport: t}}, nil
}

// Journal returns the Client's journal, for inspection.
func (c *Client) Journal() *boltjournal.Journal { return c.journal }

// Resolve is boltjournal.Journal.Resolve on the Client's journal, which also takes the
// operation off the Observer's pending gauge (Options.Observer).
func (c *Client) Resolve(ref journal.Name, status int) (*Record, error) {
	rec, from, err := c.journal.ResolveFrom(ref, status)
	if err == nil {
		c.transport.stateChanged(from, rec.State)
	}
	return rec, err
}

// Discard is boltjournal.Journal.Discard on the Client's journal, which also takes the
// operation off the Observer's pending gauge (Options.Observer).
func (c *Client) Discard(ref journal.Name, reason string) (*Record, error) {
	rec, from, err := c.journal.DiscardFrom(ref, reason)
	if err == nil {
		c.transport.stateChanged(from, rec.State)
	}
	return rec, err
}
