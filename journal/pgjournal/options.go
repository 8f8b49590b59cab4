// This file holds Options, how a PostgreSQL journal is opened.

package pgjournal

import (
	"fmt"
	"regexp"
	"time"

	"github.com/idem-go/idem/journal"
)

// Defaults for Options.
const (
	DefaultSchema    = "idem"
	DefaultNamespace = "default"
	DefaultLease     = 30 * time.Second
)

// Options configure a PostgreSQL journal. The zero value (or nil) works.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables: a plain
	// identifier (letters, digits, underscores, not starting with a digit,
	// at most 63 bytes). "" means DefaultSchema. Open creates it if needed.
	Schema string

	// Namespace names this journal among those sharing the tables: the
	// instances of one service share one namespace. "" means
	// DefaultNamespace.
	Namespace string

	// Lease is how long an operation stays leased to the instance sending
	// it without a renewal, on the database's clock. It bounds the time
	// from an instance's death to another's adoption of its operations.
	// 0 means DefaultLease; below one second is ErrInvalidOptions.
	Lease time.Duration

	local func() time.Time // the local clock; nil means time.Now (tests skew it)
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (o *Options) resolved() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.local == nil {
		c.local = time.Now
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	switch {
	case !identifier.MatchString(c.Schema):
		return c, fmt.Errorf("%w: Schema %q is not a plain identifier", journal.ErrInvalidOptions, c.Schema)
	case c.Lease < time.Second:
		return c, fmt.Errorf("%w: Lease %v is below one second", journal.ErrInvalidOptions, c.Lease)
	}
	return c, nil
}
