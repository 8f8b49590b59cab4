// Tests of a closed journal through an idem Client: a body large enough to
// be staged (body.go) gets journal.ErrClosed like a small one, and nothing
// is sent. stage_test.go has the journal's own side.

package boltjournal_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// A large body sent through a Client after Close gets journal.ErrClosed, like
// a small one, and nothing is sent.
func TestStagedBodyAfterCloseSendsNothing(t *testing.T) {
	srv := newRecordingServer(t)
	c, err := idem.Open(filepath.Join(t.TempDir(), "idem.journal"), &idem.Options{Base: srv.Client().Transport})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", bytes.NewReader(boltjournal.StagedBody("x", boltjournal.StageMin)))
	require.NoError(t, err)
	resp, err := c.HTTPClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, journal.ErrClosed)
	require.Zero(t, srv.count())
}
