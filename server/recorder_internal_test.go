// recorder_internal_test.go: what the recorder keeps when the writer below fails. A client
// that went away does not shorten the handler's answer: a retry must get it whole, never
// a truncated body passed off as complete.

package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// brokenWriter is a ResponseWriter whose connection died after max body bytes.
type brokenWriter struct {
	*httptest.ResponseRecorder
	max int
}

func (b *brokenWriter) Write(p []byte) (int, error) {
	n := min(len(p), b.max)
	b.max -= n
	if n < len(p) {
		return n, io.ErrClosedPipe
	}
	return n, nil
}

func TestRecorderKeepsWholeAnswerWhenClientLeaves(t *testing.T) {
	rec := newRecorder(&brokenWriter{ResponseRecorder: httptest.NewRecorder(), max: 3}, 1<<20)
	rec.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(rec, "hello")
	_, _ = io.WriteString(rec, " world")
	resp := rec.response(nil)
	if resp.Unreplayable != "" || string(resp.Body) != "hello world" {
		t.Fatalf("stored %q (unreplayable %q), want the whole answer", resp.Body, resp.Unreplayable)
	}
}
