// This file tests one attempt of the contract floors (floor_attempt.go),
// through the GET contract floor (floor_get.go) and on its own.

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idem-go/idem"
)

// The GET contract floor sends a copy of the request with the attempt header,
// in a context that ends when the body is closed (not before, and with no
// deadline of its own once the headers came, as idem's), and leaves the
// caller's request as it was.
func TestGETContractFloor(t *testing.T) {
	var gotHeader string
	var gotCtx context.Context
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get(idem.AttemptHeader)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	var sent *http.Request
	f := getContractFloor{base: roundTripper(func(r *http.Request) (*http.Response, error) {
		sent, gotCtx = r, r.Context()
		return http.DefaultTransport.RoundTrip(r)
	})}
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" || gotHeader != "attempt=1; max=6" || req.Header.Get(idem.AttemptHeader) != "" || sent == req {
		t.Errorf("body %q, attempt header sent %q, caller's %q: want ok, attempt=1; max=6 on a copy only", body, gotHeader, req.Header.Get(idem.AttemptHeader))
	}
	if d, ok := gotCtx.Deadline(); ok {
		t.Errorf("the attempt's context has the deadline %v: want none but the caller's", d)
	}
	if gotCtx.Err() != nil {
		t.Fatal("the attempt's context ended before its body was closed")
	}
	resp.Body.Close()
	if gotCtx.Err() == nil {
		t.Error("the attempt's context is still live after its body was closed")
	}
}

// An attempt's answer is classified as idem's DefaultClassifier classifies
// it: a 503 is tried again, and so is a 409 to a keyed request (the IETF
// draft's "in progress"), not to an unkeyed one.
func TestAttemptClassified(t *testing.T) {
	for _, tc := range []struct {
		status int
		keyed  bool
		final  bool
	}{
		{http.StatusOK, false, true},
		{http.StatusServiceUnavailable, false, false},
		{http.StatusConflict, true, false},
		{http.StatusConflict, false, true},
	} {
		var closed, cancelled bool
		base := roundTripper(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: tc.status, Body: readCloser{func() { closed = true }}}, nil
		})
		req, _ := http.NewRequest(http.MethodPost, "http://pay.example/payments", nil)
		resp, err := sendAttempt(base, req, func() { cancelled = true }, tc.keyed)
		if tc.final {
			if err != nil {
				t.Errorf("%d, keyed %v: %v, want the answer", tc.status, tc.keyed, err)
				continue
			}
			resp.Body.Close()
		} else if err == nil {
			t.Errorf("%d, keyed %v: an answer, want it tried again", tc.status, tc.keyed)
		}
		if !closed || !cancelled {
			t.Errorf("%d, keyed %v: body closed %v, attempt ended %v", tc.status, tc.keyed, closed, cancelled)
		}
	}
}

// readCloser is an empty body that tells when it is closed.
type readCloser struct{ closed func() }

func (readCloser) Read([]byte) (int, error) { return 0, io.EOF }
func (b readCloser) Close() error           { b.closed(); return nil }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
