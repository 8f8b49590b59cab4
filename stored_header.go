// This file decides which of a request's headers are journaled: all but the
// sensitive ones and the key header (storedHeader), and the names of the
// sensitive ones left out (droppedHeaders), so that Resume can tell when
// PrepareResume did not put them back. storedURL (validate.go) does the same
// for the URL.

package idem

import (
	"net/http"
	"slices"
	"strings"
)

// storedHeader drops sensitive headers and the key header before writing.
// The values it keeps are copied into one array, as http.Header.Clone does.
// A header it would keep whole, every name canonical, it returns as it is:
// the record is only this call's, and a Store copies what it keeps
// (journal.Store).
func (t *Transport) storedHeader(h http.Header) http.Header {
	n, whole := 0, true
	for k, v := range h {
		n += len(v)
		whole = whole && len(v) > 0 && k == http.CanonicalHeaderKey(k) && !t.cfg.sensitive[k] && !strings.EqualFold(k, t.cfg.KeyHeader)
	}
	if whole {
		return h
	}
	values := make([]string, 0, n)
	out := make(http.Header, len(h))
	for k, v := range h {
		ck := http.CanonicalHeaderKey(k)
		if t.cfg.sensitive[ck] || strings.EqualFold(k, t.cfg.KeyHeader) {
			continue
		}
		var vs []string // nil for no values, as before
		if len(v) > 0 {
			values = append(values, v...)
			vs = values[len(values)-len(v) : len(values) : len(values)]
		}
		if ov := out[ck]; len(ov) > 0 {
			// Spelled two ways (set through the map): the values of
			// both are kept, under the canonical name.
			vs = append(ov[:len(ov):len(ov)], vs...)
		}
		out[ck] = vs
	}
	return out
}

// droppedHeaders names the sensitive headers the request carries, so Resume
// can tell when PrepareResume did not put them back.
func (t *Transport) droppedHeaders(h http.Header) []string {
	var names []string
	for k := range h {
		if ck := http.CanonicalHeaderKey(k); t.cfg.sensitive[ck] && !slices.Contains(names, ck) {
			names = append(names, ck)
		}
	}
	slices.Sort(names)
	return names
}
