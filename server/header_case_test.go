// header_case_test.go: header field names are case-insensitive (RFC 9110 section 5.1). A
// handler that sets a field under a non-canonical map key (w.Header()["set-cookie"], as
// code that builds the map itself does) sends it all the same, and the fields that are
// never stored (Set-Cookie, hop-by-hop ones) must not be stored under that spelling either.

package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

func TestUnstoredFieldsWithNonCanonicalNamesNotReplayed(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.effects.Add(1)
			w.Header()["set-cookie"] = []string{"session=secret"}
			w.Header()["connection"] = []string{"x-hop"}
			w.Header()["x-hop"] = []string{"per-connection"}
			w.Header()["x-kept"] = []string{"kept"}
			w.WriteHeader(http.StatusCreated)
		})
	})
	first := s.post("k-case", "{}")
	require.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the handler's cookie was not sent")
	again := s.post("k-case", "{}")
	assert.True(t, again.replayed())
	assert.Empty(t, again.header.Values("Set-Cookie"), "a cookie was replayed")
	assert.Empty(t, again.header.Values("X-Hop"), "a field the Connection field named was replayed")
	assert.Equal(t, "kept", again.header.Get("X-Kept"))
	assert.EqualValues(t, 1, s.effects.Load())
}
