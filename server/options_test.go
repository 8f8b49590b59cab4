// options_test.go: New refuses options out of range.

package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idem-go/idem/server"
)

// New refuses a nil Store and out-of-range options, rather than failing per request.
func TestNewChecksOptions(t *testing.T) {
	_, err := server.New(&server.Options{})
	assert.ErrorIs(t, err, server.ErrNoStore)
	_, err = server.New(nil) // nil means the defaults, and a Store has none
	assert.ErrorIs(t, err, server.ErrNoStore)
	for name, o := range map[string]server.Options{
		"negative lease":  {Lease: -1},
		"tiny lease":      {Lease: time.Millisecond},
		"store timeout":   {Lease: time.Second, StoreTimeout: time.Second},
		"negative body":   {MaxBodyBytes: -1},
		"ttl below lease": {Lease: 2 * server.DefaultTTL},
		"bad header":      {KeyHeader: "Idempotency Key"},
		"bad method":      {Methods: []string{"PO ST"}},
	} {
		o.Store = &flakyStore{}
		_, err := server.New(&o)
		assert.ErrorIs(t, err, server.ErrInvalidOptions, name)
	}
}
