// encode_test.go checks the header encoding of stored responses: a round trip of any
// bytes, and a clear error, never a panic, for a damaged one.

package redisstore

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
		{"X-None": {}},
	} {
		got, err := decodeHeader(encodeHeader(h))
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

func TestHeaderCorrupt(t *testing.T) {
	good := encodeHeader(http.Header{"Location": {"/payments/1", "/x"}})
	for i := 1; i < len(good); i++ {
		if _, err := decodeHeader(good[:i]); !errors.Is(err, errCorrupt) {
			t.Errorf("decode of the first %d of %d bytes: %v, want errCorrupt", i, len(good), err)
		}
	}
	if _, err := decodeHeader([]byte{0xff, 0xff, 0xff}); !errors.Is(err, errCorrupt) {
		t.Errorf("decode of a bad length: %v, want errCorrupt", err)
	}
}
