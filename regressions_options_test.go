// Review (issue 5, item 4), fixed: an empty name in
// Options.SensitiveQueryParams was accepted. stripQuery then cut every empty
// query part ("a=1&&b=2") or nameless one ("=v") and recorded "" in
// DroppedQuery; url.Values never has the key "", so Resume reported
// ErrSensitiveQueryMissing whatever PrepareResume did, and the operation
// stayed pending until KeyTTL. Options.check now refuses "" with
// ErrInvalidOptions.

package idem

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReviewEmptySensitiveQueryParamRefused(t *testing.T) {
	opts := &Options{SensitiveQueryParams: []string{"token", ""}}
	_, err := Open(filepath.Join(t.TempDir(), "q.journal"), opts)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewTransport(nil, opts)
	require.ErrorIs(t, err, ErrInvalidOptions)
}
