package idem

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idem-go/idem/journal"
)

// Prepare builds the record RoundTrip would write, and writes and sends
// nothing.
func TestPrepare(t *testing.T) {
	tr, _ := testTransport(t, &Options{SensitiveQueryParams: []string{"token"}})
	ctx := WithOperationID(context.Background(), "order-7/charge")
	body := &countingBody{Reader: strings.NewReader(`{"amount":700}`)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.test/payments?token=s3cret&x=1", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	rec, err := tr.Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	if rec.OperationID != "order-7/charge" || rec.Key == "" || rec.CallerKey || rec.State != StatePending {
		t.Fatalf("Prepare: operation %q key %q caller key %v state %v", rec.OperationID, rec.Key, rec.CallerKey, rec.State)
	}
	if string(rec.Body) != `{"amount":700}` || rec.BodySHA256 != journal.BodySum(rec.Body) {
		t.Fatalf("Prepare: body %q, sum %s", rec.Body, rec.BodySHA256)
	}
	if rec.Header.Get("Authorization") != "" || strings.Contains(rec.URL, "s3cret") || rec.CredentialTag == "" {
		t.Fatalf("Prepare kept a secret or lost the credential tag: header %v, URL %s, tag %q", rec.Header, rec.URL, rec.CredentialTag)
	}
	if n := body.closes.Load(); n != 1 {
		t.Fatalf("the body was closed %d times, want once", n)
	}
	if n, err := tr.journal.PendingCount(context.Background()); err != nil || n != 0 {
		t.Fatalf("Prepare wrote %d records (%v), want none", n, err)
	}

	// A caller's key is kept, and marked as the caller's.
	req, _ = http.NewRequest(http.MethodPost, "https://api.example.test/payments", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "caller-key-1")
	if rec, err = tr.Prepare(req); err != nil || rec.Key != "caller-key-1" || !rec.CallerKey {
		t.Fatalf("Prepare with a caller's key: %+v, %v", rec, err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	tr, _ := testTransport(t, &Options{MaxBodyBytes: 4})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		body string
		key  string
		want error
	}{
		{"without journal", WithoutJournal(context.Background()), "{}", "", ErrInvalidRequest},
		{"body over the cap", context.Background(), "12345", "", ErrBodyTooLarge},
		{"bad key", context.Background(), "{}", "a\x01b", ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{Reader: strings.NewReader(tc.body)}
			req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, "https://api.example.test/p", body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != "" {
				req.Header["Idempotency-Key"] = []string{tc.key}
			}
			if _, err := tr.Prepare(req); !errors.Is(err, tc.want) {
				t.Fatalf("Prepare: %v, want %v", err, tc.want)
			}
			if n := body.closes.Load(); n != 1 {
				t.Fatalf("the body was closed %d times, want once", n)
			}
		})
	}
	if _, err := tr.Prepare(nil); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Prepare(nil): %v", err)
	}
}

// A record keeps a Host only when it overrides the URL's: http.NewRequest
// sets Host to the URL's own, which is no override and takes no room.
func TestPrepareKeepsOnlyHostOverride(t *testing.T) {
	tr, _ := testTransport(t, nil)
	for _, tc := range []struct{ host, want string }{
		{"", ""},
		{"api.example.test", ""},
		{"payments.example", "payments.example"},
	} {
		req, err := http.NewRequest(http.MethodPost, "https://api.example.test/payments", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		rec, err := tr.Prepare(req)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Host != tc.want || rec.TargetHost() != tc.want {
			t.Errorf("Host %q: record keeps %q (target host %q), want %q", tc.host, rec.Host, rec.TargetHost(), tc.want)
		}
	}
}
