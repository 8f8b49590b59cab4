// response.go holds result, a complete HTTP answer that the key store keeps for replay, and
// the JSON error answers.

package testserver

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// replayedHeader marks an answer served from a stored result, as Stripe and the IETF draft's
// examples do.
const replayedHeader = "Idempotent-Replayed"

// result is a complete answer. It is immutable once built, so stored results are shared
// between concurrent replays without copying.
type result struct {
	status int
	header http.Header
	body   []byte
}

// write sends res on w, marked as a replay if replayed.
func (res *result) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	for k, vs := range res.header {
		h[k] = append([]string(nil), vs...)
	}
	h.Set("Content-Length", strconv.Itoa(len(res.body)))
	if replayed {
		h.Set(replayedHeader, "true")
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body) // a client gone away is not the server's problem
}

// jsonResult builds an answer with v as its JSON body.
func jsonResult(status int, v any) *result {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own payment and error types reach here; they always marshal.
		panic("testserver: marshal response: " + err.Error())
	}
	return &result{
		status: status,
		header: http.Header{"Content-Type": {"application/json"}},
		body:   append(body, '\n'),
	}
}

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

// errorResult builds an error answer with a machine-readable code.
func errorResult(status int, code, message string) *result {
	return jsonResult(status, apiError{Code: code, Message: message})
}
