// path_encoding_test.go: one path spelt two ways. /%70ayments is /payments (RFC 3986
// section 6.2.2.2: percent-encoded unreserved characters are the characters themselves;
// ServeMux routes both to one handler, and a normalising proxy may turn one into the
// other between two attempts), so one key on both names one operation.

package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

func TestKeyOnPercentEncodedPathIsOneOperation(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	first, err := s.send(t.Context(), http.MethodPost, "/%70ayments", "k-path", s32Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.status)
	for _, p := range []string{"/payments", "/%70aym%65nts", "/%70ayments"} {
		again, err := s.send(t.Context(), http.MethodPost, p, "k-path", s32Body)
		require.NoError(t, err)
		assert.True(t, again.replayed(), "%s: the handler ran again (status %d)", p, again.status)
	}
	assert.EqualValues(t, 1, s.effects.Load())

	// A reserved character stays encoded: /a%2Fb is not /a/b.
	one, err := s.send(t.Context(), http.MethodPost, "/a%2Fb", "k-reserved", s32Body)
	require.NoError(t, err)
	two, err := s.send(t.Context(), http.MethodPost, "/a/b", "k-reserved", s32Body)
	require.NoError(t, err)
	assert.False(t, one.replayed() || two.replayed(), "two paths shared one record")
}
