// content_encoding_test.go: a JSON body sent with a Content-Encoding (gzip) is not JSON
// text on the wire. The middleware must not refuse it as invalid JSON; it fingerprints the
// bytes as sent, and the handler decodes them.

package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

func TestGzippedJSONBodyIsNotRefused(t *testing.T) {
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			zr, err := gzip.NewReader(r.Body)
			if err == nil {
				var v map[string]any
				if err = json.NewDecoder(zr).Decode(&v); err == nil {
					s.effects.Add(1)
					w.WriteHeader(http.StatusCreated)
					return
				}
			}
			http.Error(w, "handler: "+err.Error(), http.StatusBadRequest)
		})
	})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := io.WriteString(zw, s32Body)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for range 2 {
		got, err := s.send(t.Context(), http.MethodPost, "/payments", "k-gzip", buf.String(), "Content-Encoding", "gzip")
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, got.status, "body %s", got.body)
	}
	assert.EqualValues(t, 1, s.effects.Load())
}
