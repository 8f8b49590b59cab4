// Fuzz targets for key.go: a caller's idempotency key is accepted iff it is
// 1..255 visible ASCII characters (no space, as the server middleware wants
// it), an operation ID iff it is the same with inner spaces allowed; two key
// headers are refused, and through the Transport an invalid one never
// writes a record or sends a request.

package idem

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// keyOracle is DESIGN "Transport semantics" 2 in its plainest form: visible
// ASCII is '!' to '~'.
func keyOracle(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for _, c := range []byte(k) {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// opIDOracle is keyOracle with spaces allowed inside.
func opIDOracle(id string) bool {
	if len(id) < 1 || id[0] == ' ' || id[len(id)-1] == ' ' {
		return false
	}
	return keyOracle(strings.ReplaceAll(id, " ", "-"))
}

func FuzzValidateKey(f *testing.F) {
	f.Add("order-4827/charge", "", uint8(0))
	f.Add("abc\r\nX-Injected: 1", "other", uint8(1))
	f.Fuzz(func(t *testing.T, k, k2 string, how uint8) {
		err := validateKey("idempotency key", k)
		if want := keyOracle(k); (err == nil) != want {
			t.Fatalf("validateKey(%q) = %v, want accepted=%v", k, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("validateKey(%q) = %v, not ErrInvalidKey", k, err)
		}

		// callerKey, with the key in the context or in one or two headers.
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:9/payments", nil)
		want, wantHas, wantOK := k, true, keyOracle(k)
		switch how % 5 {
		case 0: // WithKey wins over any header
			req = req.WithContext(WithKey(req.Context(), k))
			req.Header.Set(DefaultKeyHeader, k2)
		case 1:
			req.Header[DefaultKeyHeader] = []string{k}
		case 2: // a spelling net/http would not produce
			req.Header["idempotency-KEY"] = []string{k}
		case 3: // two values, in one spelling or two, even equal ones, are refused
			req.Header[DefaultKeyHeader] = []string{k}
			if how&8 != 0 {
				req.Header.Add(DefaultKeyHeader, k2)
			} else {
				req.Header["idempotency-key"] = []string{k2}
			}
			want, wantOK = "", false
		case 4:
			want, wantHas, wantOK = "", false, true
		}
		got, has, err := callerKey(req, DefaultKeyHeader)
		if has != wantHas || (err == nil) != wantOK || (err == nil && got != want) {
			t.Fatalf("callerKey(%d, %q, %q) = %q, %v, %v; want %q, %v, ok=%v", how%5, k, k2, got, has, err, want, wantHas, wantOK)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("callerKey: %v, not ErrInvalidKey", err)
		}
	})
}

// FuzzTransportKey sends one journaled POST with a fuzzed caller key (header
// or WithKey) and operation ID through a Transport over a fresh journal.
// Invalid: ErrInvalidKey, body closed once, nothing written, nothing sent.
// Valid: one attempt carrying exactly that key, and one record holding it.
func FuzzTransportKey(f *testing.F) {
	f.Add("k", "", uint8(0))
	f.Add("k", "order-1\ncharge", uint8(3))
	f.Fuzz(func(t *testing.T, key, opID string, how uint8) {
		wire := newWireLog(t)
		wire.intercept = func(r *http.Request, _ string) (*http.Response, error) {
			return synthetic(r, http.StatusCreated), nil
		}
		j := memStore(t)
		tr, _ := transportOver(t, j, Options{}, wire, time.Time{})
		ctx := context.Background()
		hasKey, hasOp := how&1 == 0 || how&4 != 0, how&2 != 0
		if hasOp {
			ctx = WithOperationID(ctx, opID)
		}
		if how&4 != 0 {
			ctx = WithKey(ctx, key)
		}
		req, body := paymentRequest(t, ctx, "http://127.0.0.1:9", "order-k", 1)
		if how&1 == 0 {
			req.Header[DefaultKeyHeader] = []string{key}
		}
		valid := (!hasKey || keyOracle(key)) && (!hasOp || opIDOracle(opID))

		resp, err := tr.RoundTrip(req)
		if n := body.closes.Load(); n != 1 {
			t.Fatalf("the caller's body was closed %d times", n)
		}
		recs, rerr := j.Records()
		if rerr != nil {
			t.Fatal(rerr)
		}
		sent := wire.sent()
		if !valid {
			if resp != nil || !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("key %q, operation ID %q (how %d): %v, %v; want ErrInvalidKey", key, opID, how, resp, err)
			}
			if len(recs) != 0 || len(sent) != 0 {
				t.Fatalf("invalid key %q / operation ID %q: %d records written, %d attempts sent", key, opID, len(recs), len(sent))
			}
			return
		}
		if err != nil || resp == nil {
			t.Fatalf("key %q, operation ID %q (how %d): %v, %v", key, opID, how, resp, err)
		}
		resp.Body.Close()
		if len(recs) != 1 || len(sent) != 1 || len(sent[0].Keys) != 1 || sent[0].Keys[0] != recs[0].Key {
			t.Fatalf("%d records, attempts %+v", len(recs), sent)
		}
		if hasKey && recs[0].Key != key || hasOp && recs[0].OperationID != opID {
			t.Fatalf("record key %q, operation ID %q; the caller gave %q, %q", recs[0].Key, recs[0].OperationID, key, opID)
		}
	})
}
