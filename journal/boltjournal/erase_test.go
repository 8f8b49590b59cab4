// Tests that what a Transport settles leaves the file: once every call has
// settled, no byte of any body is in the journal's buckets (body.go,
// deleteBody). residue_test.go has the journal's own API; these drive many
// concurrent calls through an idem Transport.

package boltjournal_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idem-go/idem"
	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// Many concurrent calls through a Transport against a loopback server, with
// large and staged bodies: once every call has settled, no byte of any body
// is in the file's buckets. The bytes of freed pages are another matter
// (docs/real-world.md, "The journal file"): the test reports them, it cannot promise
// them gone.
func TestTransportSettlesLeaveNoBody(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.journal")
	j, err := boltjournal.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	srv := newRecordingServer(t)
	tr, err := idem.NewTransport(j, &idem.Options{Base: srv.Client().Transport})
	require.NoError(t, err)

	const calls = 24
	g := boltjournal.NewBodyGrams(boltjournal.ResidueBytes(calls))
	bodies := make([][]byte, calls)
	for i := range bodies {
		bodies[i] = boltjournal.RandomBody(t, boltjournal.ResidueSizes[i%len(boltjournal.ResidueSizes)])
		g.Add(i, bodies[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", bytes.NewReader(bodies[i]))
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errs[i] = fmt.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	require.Equal(t, calls, srv.count())
	require.NoError(t, j.Close()) // commits the deferred settles

	require.Empty(t, boltjournal.RawBodyResidue(t, path, g), "bytes of settled bodies in the buckets, by call")
	t.Logf("bodies with bytes left in freed pages of the raw file: %d of %d", boltjournal.RawFileResidue(t, path, g), calls)
}
