// middleware_test.go: bad input gets a clear 4xx, runs nothing and stores nothing: malformed
// and oversized keys, oversized bodies, invalid JSON; and what is not covered passes by.

package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idem-go/idem/server"
)

func TestBadInputRefused(t *testing.T) {
	s := newService(t, server.Options{MaxBodyBytes: 1024, Required: true}, nil)
	big := `{"amount":1,"currency":"` + strings.Repeat("x", 1024) + `"}`
	for _, c := range []struct {
		name, key, ctype, body string
		status                 int
		problem                string
	}{
		{"missing key", "", "application/json", s31Body, 400, "key-missing"},
		{"key of 256", strings.Repeat("k", 256), "application/json", s31Body, 400, "key-malformed"},
		{"tab in key", "a\tb", "application/json", s31Body, 400, "key-malformed"},
		{"space in key", `"a b"`, "application/json", s31Body, 400, "key-malformed"},
		{"empty sf-string", `""`, "application/json", s31Body, 400, "key-malformed"},
		{"bad escape", `"a\nb"`, "application/json", s31Body, 400, "key-malformed"},
		{"non-ASCII key", "clé", "application/json", s31Body, 400, "key-malformed"},
		{"body over the limit", "k-big", "application/json", big, 413, "body-too-large"},
		{"invalid JSON", "k-json", "application/json", `{"amount":1,`, 400, "body-invalid"},
		{"duplicate member", "k-dup", "application/json", `{"amount":1,"amount":2}`, 400, "body-invalid"},
		{"two values", "k-two", "application/json", `{} {}`, 400, "body-invalid"},
		{"not UTF-8", "k-utf", "application/merge-patch+json", "{\"a\":\"\xff\"}", 400, "body-invalid"},
		{"lone surrogate", "k-sur", "application/json", `{"a":"\ud800"}`, 400, "body-invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.send(t.Context(), http.MethodPost, "/payments", "", c.body,
				"Idempotency-Key", c.key, "Content-Type", c.ctype)
			if c.key == "" {
				got, err = s.send(t.Context(), http.MethodPost, "/payments", "", c.body)
			}
			require.NoError(t, err)
			assert.Equal(t, c.status, got.status, "%s", got.body)
			assert.Equal(t, c.problem, got.problemType(t))
			if c.key != "" {
				assert.NotContains(t, string(got.body), c.key, "the problem echoes the key")
			}
		})
	}
	assert.EqualValues(t, 0, s.effects.Load())
	assert.Zero(t, s.store.Len(), "bad input left a record")
	assert.Zero(t, s.obs.Count("claimed"))
}

// Over a raw connection: a chunked body (no Content-Length) over the limit is refused as
// well; a key with DEL gets 400 too (net/http refuses that one itself, before the
// middleware; a tab, which it lets through, is refused by the middleware: see above).
func TestBadInputRaw(t *testing.T) {
	s := newService(t, server.Options{MaxBodyBytes: 16}, nil)
	raw := func(req string) string {
		conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, req)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}
	chunked := "POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\nContent-Type: application/json\r\n" +
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n20\r\n" + strings.Repeat("x", 32) + "\r\n0\r\n\r\n"
	assert.Equal(t, "413", raw(chunked))
	del := "POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x7fb\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
	assert.Equal(t, "400", raw(del))
	assert.EqualValues(t, 0, s.effects.Load())
	assert.Zero(t, s.store.Len())
}

// Without Required, a request without a key runs as if there were no middleware; methods
// not covered pass by even with a key.
func TestNotCoveredPassesThrough(t *testing.T) {
	s := newService(t, server.Options{}, nil)
	assert.Equal(t, http.StatusCreated, s.post("", s31Body).status)
	assert.Equal(t, http.StatusCreated, s.post("", s31Body).status)
	got, err := s.send(t.Context(), http.MethodPut, "/payments", "k", s31Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, got.status)
	assert.Empty(t, got.header.Get("Idempotency-Policy"), "an uncovered method is advertised")
	assert.EqualValues(t, 3, s.effects.Load())
	assert.Zero(t, s.store.Len())
}

// The handler reads the whole body, with its length, though the middleware read it first;
// here it came chunked, without a Content-Length.
func TestHandlerGetsWholeBody(t *testing.T) {
	var got []byte
	var length int64
	s := newService(t, server.Options{}, func(s *service) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			length = r.ContentLength
			got, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
		})
	})
	body := strings.Repeat(`{"a":1}`, 1000)
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/payments", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := do(req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.status)
	assert.Equal(t, body, string(got))
	assert.EqualValues(t, len(body), length)
}

// KeyHeader and Methods are configurable: here the key is X-Request-Key and PUT is covered
// too; the default header means nothing then.
func TestConfiguredHeaderAndMethods(t *testing.T) {
	s := newService(t, server.Options{KeyHeader: "X-Request-Key", Methods: []string{http.MethodPost, http.MethodPut}}, nil)
	put := func() answer {
		a, err := s.send(t.Context(), http.MethodPut, "/payments", "", s31Body, "X-Request-Key", "k")
		require.NoError(t, err)
		return a
	}
	assert.False(t, put().replayed())
	assert.True(t, put().replayed())
	assert.False(t, s.post("k", s31Body).replayed(), "Idempotency-Key was read")
	assert.False(t, s.post("k", s31Body).replayed())
	assert.Contains(t, put().header.Get("Idempotency-Policy"), `header="x-request-key"`)
	assert.EqualValues(t, 3, s.effects.Load())
}
