// This file holds Options, how a bbolt journal is opened.

package boltjournal

import (
	"fmt"
	"time"

	"github.com/idem-go/idem/journal"
)

// Defaults for Options.
const (
	DefaultRetention   = 7 * 24 * time.Hour
	DefaultOpenTimeout = time.Second
)

// Options configure a bbolt journal. The zero value (or nil) works: a
// plaintext journal with the defaults.
type Options struct {
	// Encryption, if set, seals what each new record holds of its request
	// (body, headers, URL query, body hash, identity) under its Current key
	// with AES-256-GCM, and opens records sealed under any of its Keys. See
	// Keyring. An invalid Keyring fails Open with journal.ErrInvalidOptions.
	Encryption *Keyring

	// Retention is how long settled, failed and expired records are kept
	// before pruning. Pending records are never pruned. 0 means
	// DefaultRetention. (idem.Open raises it to KeyTTL at least.)
	Retention time.Duration

	// OpenTimeout bounds the wait for the file lock. 0 means
	// DefaultOpenTimeout.
	OpenTimeout time.Duration
}

// Validate reports what Open would refuse in o, with an error matching
// journal.ErrInvalidOptions naming the field; nil for a nil o.
func (o *Options) Validate() error {
	_, _, err := o.resolved()
	return err
}

// resolved returns o with its defaults filled in, and its Keyring built.
func (o *Options) resolved() (Options, *keyring, error) {
	var c Options
	if o != nil {
		c = *o
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Retention", c.Retention}, {"OpenTimeout", c.OpenTimeout}} {
		if f.d < 0 {
			return c, nil, fmt.Errorf("%w: %s %v is negative", journal.ErrInvalidOptions, f.name, f.d)
		}
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	k, err := build(c.Encryption)
	return c, k, err
}
