// problem.go writes the middleware's own answers as RFC 9457 problem details
// (application/problem+json), as draft section 2.7's examples do.

package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem types, the fragment of Options.PolicyURL that each problem's "type" member ends
// in. Clients branch on them, never on the title or detail.
const (
	ProblemKeyMissing     = "key-missing"       // 400: a required key is missing
	ProblemKeyMalformed   = "key-malformed"     // 400: the key is not 1..255 visible ASCII
	ProblemBadRequestBody = "body-invalid"      // 400: the body cannot be fingerprinted
	ProblemBodyTooLarge   = "body-too-large"    // 413: the body exceeds MaxBodyBytes
	ProblemIdentity       = "identity"          // 403: Options.Identity failed
	ProblemInProgress     = "key-in-progress"   // 409: another request holds the key
	ProblemStuck          = "key-stuck"         // 409: the holder died; awaiting recovery or expiry
	ProblemKeyReused      = "key-reused"        // 422: the key was used for another request
	ProblemNotReplayable  = "not-replayable"    // 422: it ran, but its response was not kept
	ProblemUnavailable    = "store-unavailable" // 503: the Store cannot be reached; nothing ran
)

// problem is an RFC 9457 problem details object; OriginalStatus is an extension member.
type problem struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail,omitempty"`
	OriginalStatus int    `json:"original_status,omitempty"`
}

// writeProblem answers w with a problem of type name. retryAfter, if positive, is sent as
// Retry-After in whole seconds, rounded up and at least 1. The detail never holds the key:
// it may be guessable, and a log or a proxy cache should not learn it from an error page.
func (c *config) writeProblem(w http.ResponseWriter, status int, name, title, detail string, retryAfter time.Duration, extra ...func(*problem)) {
	p := problem{Type: c.PolicyURL + "#" + name, Title: title, Status: status, Detail: detail}
	for _, f := range extra {
		f(&p)
	}
	body, _ := json.Marshal(p) // only strings and ints: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Add("Link", "<"+c.PolicyURL+`>; rel="describedby"`)
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(retryAfter), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone away is not the server's problem
}

// retryAfterSeconds rounds d up to whole seconds, at least 1: Retry-After has no fractions
// (RFC 9110 section 10.2.3), and 0 would invite a busy loop.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// itoa is strconv.Itoa, for the String methods.
func itoa(i int) string { return strconv.Itoa(i) }
