// This file reads a request's body once, into memory, so every attempt can
// replay the same bytes (transport.go decides what to do with them).

package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
)

// body is a request body read into memory for replay. When the body is over
// the cap, buf holds the first bytes and rest the unread remainder.
type body struct {
	buf      []byte
	tooLarge bool
	rest     io.ReadCloser
}

func (b *body) close() {
	if b.rest != nil {
		b.rest.Close()
	}
}

// readBody reads at most MaxBodyBytes of the caller's body. It closes the body
// unless the body is over the cap, in which case rest keeps it open for a
// one-shot unjournaled send. A body shorter than the request's ContentLength
// is read again from GetBody. If the request context ends first, the body is
// closed (which unblocks most readers) and the context's error returned.
func (t *Transport) readBody(req *http.Request) (body, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return body{}, nil
	}
	if req.ContentLength > t.cfg.MaxBodyBytes {
		return body{tooLarge: true, rest: req.Body}, nil // over the cap: nothing read
	}
	limit := t.cfg.MaxBodyBytes
	if limit < math.MaxInt64 {
		limit++ // one byte more tells "at the cap" from "over it"
	}
	buf, err := readAll(req.Context(), req.Body, limit, req.ContentLength)
	switch {
	case errors.Is(err, errBodyAbandoned):
		return body{}, req.Context().Err()
	case err != nil:
		req.Body.Close()
		return body{}, fmt.Errorf("idem: reading request body: %w", err)
	case int64(len(buf)) > t.cfg.MaxBodyBytes:
		return body{buf: buf, tooLarge: true, rest: req.Body}, nil
	}
	if err := req.Body.Close(); err != nil {
		return body{}, fmt.Errorf("idem: closing request body: %w", err)
	}
	if int64(len(buf)) < req.ContentLength {
		// An earlier call with this request value spent its Body. Start again
		// from GetBody, as net/http does for its own retries; without it, refuse
		// rather than send a shortened body.
		if req.GetBody == nil {
			return body{}, fmt.Errorf("%w: ContentLength=%d with Body length %d", ErrInvalidRequest, req.ContentLength, len(buf))
		}
		rc, err := req.GetBody()
		if err != nil {
			return body{}, fmt.Errorf("idem: request GetBody: %w", err)
		}
		fresh := *req
		fresh.Body, fresh.GetBody = rc, nil
		return t.readBody(&fresh)
	}
	return body{buf: buf}, nil
}

// errBodyAbandoned means readAll closed the body because the context ended.
var errBodyAbandoned = errors.New("idem: request body abandoned")

// readAll reads up to limit bytes of r, giving up when ctx ends: then it closes
// r and returns errBodyAbandoned.
func readAll(ctx context.Context, r io.ReadCloser, limit, size int64) ([]byte, error) {
	if ctx.Done() == nil || inMemory(r) {
		return readSized(r, limit, size) // cannot block: no goroutine to watch ctx
	}
	type result struct {
		buf []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		buf, err := readSized(r, limit, size)
		done <- result{buf, err}
	}()
	select {
	case res := <-done:
		return res.buf, res.err
	case <-ctx.Done():
		r.Close()
		return nil, errBodyAbandoned
	}
}

// readSized is io.ReadAll of at most limit bytes, into one buffer of the
// announced size when there is one (ContentLength), so a large body is held
// once instead of through io.ReadAll's doublings.
func readSized(r io.Reader, limit, size int64) ([]byte, error) {
	if size <= 0 || size >= limit {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	buf := make([]byte, 0, size+1) // +1: room to read EOF without growing
	lr := io.LimitReader(r, limit)
	for {
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		case len(buf) == cap(buf):
			buf = append(buf, 0)[:len(buf)] // longer than announced: grow
		}
	}
}

// nopCloserTypes are io.NopCloser's result types, which net/http also looks
// through to tell a body held in memory.
var nopCloserTypes = [2]reflect.Type{
	reflect.TypeOf(io.NopCloser(strings.NewReader(""))), // one that is an io.WriterTo
	reflect.TypeOf(io.NopCloser(struct{ io.Reader }{})),
}

// inMemory reports whether r reads from memory, as the bodies
// http.NewRequest makes do (a *bytes.Reader, *bytes.Buffer or
// *strings.Reader, bare or in io.NopCloser): reading it never blocks.
func inMemory(r io.Reader) bool {
	if t := reflect.TypeOf(r); t == nopCloserTypes[0] || t == nopCloserTypes[1] {
		r, _ = reflect.ValueOf(r).Field(0).Interface().(io.Reader)
	}
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	return false
}
