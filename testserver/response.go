// response.go holds result, a complete answer of the fake API, and its JSON error answers;
// buffered, the whole answer to a POST /payments kept until its fault lets it out; and
// captured, the request body as the middleware read it, for the logs.

package testserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// result is a complete answer. It is immutable once built.
type result struct {
	status int
	header http.Header
	body   []byte
}

// write sends res on w.
func (res *result) write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range res.header {
		h[k] = append([]string(nil), vs...)
	}
	h.Set("Content-Length", strconv.Itoa(len(res.body)))
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body) // a client gone away is not the server's problem
}

// jsonResult builds an answer with v as its JSON body.
func jsonResult(status int, v any) *result {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own payment and error types reach here; they always marshal.
		panic("testserver: marshal response: " + err.Error())
	}
	return &result{
		status: status,
		header: http.Header{"Content-Type": {"application/json"}},
		body:   append(body, '\n'),
	}
}

// apiError is the body of the fake API's own error answers; the middleware's (bad key,
// 409, 422, 413 for a keyed request) are RFC 9457 problem details instead.
type apiError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

// errorResult builds an error answer with a machine-readable code.
func errorResult(status int, code, message string) *result {
	return jsonResult(status, apiError{Code: code, Message: message})
}

// buffered is an http.ResponseWriter that keeps the whole answer; one goroutine uses it.
type buffered struct {
	header http.Header
	status int
	body   []byte
}

func (b *buffered) Header() http.Header { return b.header }

func (b *buffered) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *buffered) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	b.body = append(b.body, p...)
	return len(p), nil
}

// isProblem reports whether the kept answer is the middleware's problem name (e.g.
// "store-unavailable") with status.
func (b *buffered) isProblem(status int, name string) bool {
	if b.status != status || b.header.Get("Content-Type") != "application/problem+json" {
		return false
	}
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(b.body, &p) == nil && strings.HasSuffix(p.Type, "#"+name)
}

// writeTo sends the kept answer on w.
func (b *buffered) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range b.header {
		h[k] = vs
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body) // a client gone away is not the server's problem
}

// captured reads a request body through, keeping up to limit bytes of it. It is safe for
// concurrent use: the Observer may read it from the middleware's heartbeat goroutine.
type captured struct {
	r     io.ReadCloser
	limit int64

	mu   sync.Mutex
	kept []byte
}

func (c *captured) Read(p []byte) (int, error) {
	if c.r == nil {
		return 0, io.EOF
	}
	n, err := c.r.Read(p)
	c.mu.Lock()
	if room := c.limit - int64(len(c.kept)); room > 0 {
		c.kept = append(c.kept, p[:min(int64(n), room)]...)
	}
	c.mu.Unlock()
	return n, err
}

func (c *captured) Close() error {
	if c.r == nil {
		return nil
	}
	return c.r.Close()
}

// bytes returns what was read so far.
func (c *captured) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept
}
