// headercodec_test.go checks the header encoding of stored responses: a round trip of any
// bytes, and a clear error, never a panic, for a damaged one.

package server

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{"X-Empty": {""}},
		{"Content-Type": {"text/plain"}, "X-Multi": {"a", "b", "c"}, "X-Bytes": {"\x00\xff\x80 é"}},
	} {
		got, err := ParseHeader(AppendHeader(nil, h))
		if err != nil {
			t.Fatalf("decode(%v): %v", h, err)
		}
		if len(h) == 0 {
			h = nil
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("round trip of %v = %v", h, got)
		}
	}
}

// A name without values is not kept: nothing of it reaches a client either.
func TestHeaderNameWithoutValues(t *testing.T) {
	got, err := ParseHeader(AppendHeader(nil, http.Header{"X-None": {}}))
	if err != nil || got != nil {
		t.Errorf("round trip of a name without values = %v, %v; want nil, nil", got, err)
	}
}

func TestHeaderCorrupt(t *testing.T) {
	good := AppendHeader(nil, http.Header{"Location": {"/payments/1", "/x"}})
	for i := 1; i < len(good); i++ {
		if _, err := ParseHeader(good[:i]); !errors.Is(err, ErrCorruptHeader) {
			t.Errorf("decode of the first %d of %d bytes: %v, want ErrCorruptHeader", i, len(good), err)
		}
	}
	for _, b := range [][]byte{{0xff, 0xff, 0xff}, append(good, 'x'), {0, 1}} {
		if _, err := ParseHeader(b); !errors.Is(err, ErrCorruptHeader) {
			t.Errorf("decode of %q: %v, want ErrCorruptHeader", b, err)
		}
	}
}

// FuzzParseHeader: any bytes give a header or ErrCorruptHeader, never a panic, and what parses
// encodes back to the same bytes.
func FuzzParseHeader(f *testing.F) {
	f.Add(AppendHeader(nil, http.Header{"Location": {"/payments/1", "/x"}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptHeader) {
				t.Fatalf("ParseHeader(%q) = %v, not ErrCorruptHeader", b, err)
			}
			return
		}
		if back, err := ParseHeader(AppendHeader(nil, h)); err != nil || !reflect.DeepEqual(back, h) {
			t.Fatalf("%q parsed to %v, which round-trips to %v, %v", b, h, back, err)
		}
	})
}

// A header of a few fields encodes without allocating: the memstore keeps every response
// in this form, on the request path.
func TestAppendHeaderAllocatesNothingForAFewFields(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Location": {"/payments/1"}, "X-A": {"1", "2"}}
	b := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { b = AppendHeader(b[:0], h) }); n != 0 {
		t.Fatalf("AppendHeader allocated %v times", n)
	}
}
