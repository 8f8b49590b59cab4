// stored.go is the form in which the Store keeps a response: its unreplayable reason, its
// header fields (server.AppendHeader's encoding) and its body in one byte slice, a copy the
// caller cannot change, with no pointers for the garbage collector to follow while the
// record lives. Its status and where its parts end live in the record's slot.

package memstore

import (
	"fmt"

	"github.com/idem-go/idem/server"
)

// stored is a response encoded, not yet in a slot.
type stored struct {
	enc       []byte // the unreplayable reason, the header fields, then the body
	status    int
	unrEnd    int
	headerEnd int
}

// store copies resp into its stored form, in one allocation.
func store(resp *server.Response) stored {
	n := 10 + len(resp.Unreplayable) + len(resp.Body) // the pair count, then the rest
	for k, vs := range resp.Header {
		for _, v := range vs {
			n += 20 + len(k) + len(v) // two uvarint lengths and the strings
		}
	}
	enc := append(make([]byte, 0, n), resp.Unreplayable...)
	unrEnd := len(enc)
	enc = server.AppendHeader(enc, resp.Header)
	headerEnd := len(enc)
	enc = append(enc, resp.Body...)
	return stored{enc: enc, status: resp.Status, unrEnd: unrEnd, headerEnd: headerEnd}
}

// keep puts st in slot i as its response. Called with mu held.
func (s *Store) keep(i int32, st stored) {
	sl := s.slots.at(i)
	sl.done, sl.status, sl.unrEnd, sl.headerEnd = true, st.status, st.unrEnd, st.headerEnd
	s.vars.at(i).resp = st.enc
}

// response returns a new copy of the response of the done record in slot i, for the
// caller to keep. Called with mu held.
func (s *Store) response(i int32) (*server.Response, error) {
	sl, enc := s.slots.at(i), s.vars.at(i).resp
	h, err := server.ParseHeader(enc[sl.unrEnd:sl.headerEnd])
	if err != nil {
		return nil, fmt.Errorf("memstore: a stored response: %w", err)
	}
	var body []byte
	if len(enc) > sl.headerEnd {
		body = append([]byte(nil), enc[sl.headerEnd:]...)
	}
	return &server.Response{Status: sl.status, Header: h, Body: body, Unreplayable: string(enc[:sl.unrEnd])}, nil
}
