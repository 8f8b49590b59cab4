// stored.go is the form in which the Store keeps a response: its header fields
// (server.AppendHeader's encoding) and body in one byte slice, a copy the caller cannot
// change, with no pointers for the garbage collector to follow while the record lives.

package memstore

import (
	"fmt"

	"github.com/idem-go/idem/server"
)

// stored is a response as kept: immutable once made.
type stored struct {
	status       int
	unreplayable string
	enc          []byte // the header fields (server.AppendHeader), then the body
	header       int    // how many bytes of enc the header fields take
}

// store copies resp into its stored form, in one allocation.
func store(resp *server.Response) *stored {
	n := 10 + len(resp.Body) // the pair count, then the body
	for k, vs := range resp.Header {
		for _, v := range vs {
			n += 20 + len(k) + len(v) // two uvarint lengths and the strings
		}
	}
	enc := server.AppendHeader(make([]byte, 0, n), resp.Header)
	header := len(enc)
	enc = append(enc, resp.Body...)
	return &stored{status: resp.Status, unreplayable: resp.Unreplayable, enc: enc, header: header}
}

// response returns a new copy of the stored response, for the caller to keep.
func (st *stored) response() (*server.Response, error) {
	h, err := server.ParseHeader(st.enc[:st.header])
	if err != nil {
		return nil, fmt.Errorf("memstore: a stored response: %w", err)
	}
	var body []byte
	if len(st.enc) > st.header {
		body = append([]byte(nil), st.enc[st.header:]...)
	}
	return &server.Response{Status: st.status, Header: h, Body: body, Unreplayable: st.unreplayable}, nil
}
