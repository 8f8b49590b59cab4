// fingerprint.go computes DefaultFingerprint: what makes two requests with one key "the
// same request" (draft section 2.4).

package server

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// DefaultFingerprint is the fingerprint when Options.Fingerprint is nil: hex SHA-256 over
// the method, the path and the body; not the query, which may carry a credential a client
// refreshes between attempts (idem's SensitiveQueryParams). A body whose Content-Type is
// JSON (application/json or any +json type) is hashed in canonical form (see the package
// doc: key order, white space and number spelling do not matter), and refused with an
// error, which the middleware answers with 400, if it is not valid I-JSON (invalid,
// duplicate member names, not UTF-8). Any other body, an empty one, and one sent with a
// Content-Encoding (gzip: not JSON text on the wire) are hashed as raw bytes. Which of
// the two readings was used is hashed too: the same bytes sent once as JSON and once
// without a JSON Content-Type are different requests, and reusing a key across them gets
// 422.
func DefaultFingerprint(r *http.Request, body []byte) (string, error) {
	f := fingerprinters.Get().(*fingerprinter)
	defer f.release()
	kind, canon := "raw", body
	if len(body) > 0 && isJSON(r.Header.Get("Content-Type")) && notEncoded(r) {
		var err error
		if canon, err = f.canon.canonicalize(body); err != nil {
			return "", err
		}
		kind = "json"
	}
	f.h.Reset()
	f.buf = f.buf[:0]
	for _, s := range [...]string{"idem-fingerprint-v1", r.Method, canonicalPath(r.URL.EscapedPath()), kind} {
		f.buf = append(append(f.buf, s...), 0)
	}
	f.h.Write(f.buf)
	f.h.Write(canon)
	sum := f.h.Sum(f.buf[:0])
	f.hex = hex.AppendEncode(f.hex[:0], sum)
	return string(f.hex), nil
}

// fingerprinter is DefaultFingerprint's working memory, reused through fingerprinters so
// that a fingerprint allocates its result and little else, whatever the body.
type fingerprinter struct {
	canon canonState
	h     hash.Hash
	buf   []byte // the header fields hashed before the body, then the sum
	hex   []byte
}

var fingerprinters = sync.Pool{New: func() any { return &fingerprinter{h: sha256.New()} }}

// release returns f to fingerprinters, holding no body and no huge buffer.
func (f *fingerprinter) release() {
	f.canon.reset(nil)
	f.buf = keep(f.buf)
	fingerprinters.Put(f)
}

// isJSON reports whether the media type ct is JSON: application/json or a structured
// syntax suffix +json (RFC 6839 section 3.1).
func isJSON(ct string) bool {
	if ct == "application/json" || ct == "application/json; charset=utf-8" {
		return true // the usual ones, without the map ParseMediaType allocates
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// notEncoded reports whether r's body is sent as it is: no Content-Encoding, or only
// "identity" (RFC 9110 section 8.4).
func notEncoded(r *http.Request) bool {
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}
