// Journals written by an older idem (format 5, and 7 sealed), with
// operations left pending, opened by this idem. Each must
// still be resumed, or re-called by its operation ID, exactly once, with its
// key and bytes, and not refused as another identity's or another request.
// The fixtures (testdata/legacy) were written by e2d2b67's idem with
// testdata/legacy/mkold.go.txt: four POSTs to http://legacy.test/payments,
// every dial failing, MaxAttempts 1.

package idem

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/stretchr/testify/require"
)

// openLegacy copies the gzipped fixture name to a temporary file.
func openLegacy(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "legacy", name))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "idem.journal")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(out, zr)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

// toAddr is a base that sends every request, whatever its host, to addr.
func toAddr(addr string) *http.Transport {
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

func legacyPay(ref string, pad int) string {
	return fmt.Sprintf(`{"amount":100,"currency":"EUR","reference":%q,"pad":%q}`, ref, strings.Repeat("x", pad))
}

func TestLegacyJournalResumedExactlyOnce(t *testing.T) {
	for _, fixture := range []string{"journal-5.gz", "journal-7.gz"} {
		t.Run(fixture, func(t *testing.T) {
			pay := startPayments(t, nil)
			base := toAddr(strings.TrimPrefix(pay.URL, "http://"))
			t.Cleanup(base.CloseIdleConnections)
			path := openLegacy(t, fixture)
			// The fixtures' operations are as old as the fixtures: a KeyTTL
			// of decades keeps them from expiring whatever today's date.
			opts := &Options{Base: base, KeyTTL: 50 * 365 * 24 * time.Hour, PrepareResume: func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer legacy-token")
				return nil
			}}
			if strings.Contains(fixture, "7") {
				opts.Journal.Encryption = &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": []byte(strings.Repeat("k", 32))}}
			}
			c, err := Open(path, opts)
			require.NoError(t, err)
			defer c.Close()
			recs, err := c.Journal().Records()
			require.NoError(t, err)
			require.Len(t, recs, 4)
			for _, r := range recs {
				require.Equal(t, StatePending, r.State, "%s", r.OperationID)
			}

			// The application calls its operation again, as after a
			// restart, with the same request (a refreshed token would be
			// refused only for a record bound to credentials).
			req, err := http.NewRequestWithContext(WithOperationID(context.Background(), "charge/op"),
				http.MethodPost, "http://legacy.test/payments", strings.NewReader(legacyPay("op", 0)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer legacy-token")
			resp, err := c.Transport().RoundTrip(req)
			require.NoError(t, err, "re-call of a legacy pending operation")
			drain(t, resp)
			require.Equal(t, http.StatusCreated, resp.StatusCode)

			outs := resumeAll(t, c.Transport())
			require.Len(t, outs, 3)
			for _, o := range outs {
				require.NoError(t, o.Err, "%s", o.Record.OperationID)
				require.Equal(t, http.StatusCreated, o.Response.StatusCode)
			}
			led := pay.Ledger()
			for _, ref := range []string{"op", "key", "big", "plain"} {
				require.Equal(t, 1, led.Effects[ref], "effects of %s", ref)
			}

			// Called again (as Resume sent it, PrepareResume adding the
			// token): the server replays, one effect.
			req, err = http.NewRequestWithContext(WithOperationID(context.Background(), "charge/plain"),
				http.MethodPost, "http://legacy.test/payments", strings.NewReader(legacyPay("plain", 0)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer legacy-token")
			resp, err = c.Transport().RoundTrip(req)
			require.NoError(t, err)
			drain(t, resp)
			require.Equal(t, 1, pay.Ledger().Effects["plain"])
		})
	}
}
