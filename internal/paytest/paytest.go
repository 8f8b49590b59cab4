// Package paytest holds the small helpers that tests of idem's client, in the root package
// and in journal/boltjournal's external tests, share: a fake payments server, a payment
// body and request, a drained response, and a random encryption key.
package paytest

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/journal/seal"
	"github.com/idem-go/idem/testserver"
)

// StartPayments starts a testserver, closed at the end of the test.
func StartPayments(tb testing.TB, opts *testserver.Options) *testserver.Server {
	tb.Helper()
	srv := testserver.NewServer(opts)
	tb.Cleanup(srv.Close)
	return srv
}

// PaymentBody is the JSON body of POST /payments.
func PaymentBody(ref string, amount int) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"eur","reference":%q}`, amount, ref)
}

// NewRequest builds a request with body ("" for none).
func NewRequest(tb testing.TB, method, url, body string) *http.Request {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(tb, err)
	return req
}

// Drain reads and closes a response body and returns it.
func Drain(tb testing.TB, resp *http.Response) []byte {
	tb.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return b
}

// NewKey returns a random encryption key of seal.KeySize bytes (AES-256).
func NewKey(tb testing.TB) []byte {
	tb.Helper()
	k := make([]byte, seal.KeySize)
	_, err := rand.Read(k)
	require.NoError(tb, err)
	return k
}
