package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idem-go/idem"
)

// The GET contract floor sends a copy of the request with the attempt header,
// under a deadline that ends when the body is closed, and leaves the
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
	if d, ok := gotCtx.Deadline(); !ok || time.Until(d) > idem.DefaultAttemptTimeout {
		t.Errorf("the attempt's deadline %v, %v: want one within the attempt timeout", d, ok)
	}
	if gotCtx.Err() != nil {
		t.Fatal("the attempt's context ended before its body was closed")
	}
	resp.Body.Close()
	if gotCtx.Err() == nil {
		t.Error("the attempt's context is still live after its body was closed")
	}

	srv503 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer srv503.Close()
	req503, _ := http.NewRequest(http.MethodGet, srv503.URL, nil)
	if resp, err := f.RoundTrip(req503); err == nil {
		resp.Body.Close()
		t.Error("a 503 came back as an answer, want it classified as retryable")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
