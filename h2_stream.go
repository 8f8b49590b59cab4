// This file recognises HTTP/2 stream resets for classify.go without
// importing golang.org/x/net/http2: net/http's bundled HTTP/2 StreamError has
// an As method that fills any struct of the same field names and convertible
// field types (net/http h2_error.go), the hook x/net's StreamError uses.

package idem

import (
	"errors"
	"fmt"
)

// h2RefusedStream is HTTP/2's REFUSED_STREAM error code (RFC 9113 section 7).
const h2RefusedStream = 0x7

// h2StreamError mirrors net/http's HTTP/2 StreamError, field for field.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string {
	return fmt.Sprintf("idem: HTTP/2 stream %d reset with code %#x", e.StreamID, e.Code)
}

// refusedStream reports whether err is an HTTP/2 stream reset with
// REFUSED_STREAM: RFC 9113 section 8.7 promises the server did no
// processing. net/http retries such a stream itself, up to 6 times with a
// backoff of its own, before it returns this error.
func refusedStream(err error) bool {
	var se h2StreamError
	return errors.As(err, &se) && se.Code == h2RefusedStream
}
