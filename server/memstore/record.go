// record.go is how the Store keeps its records with few pointers for the garbage collector
// to follow: each record is a pointer-free slot in one array (chunked.go), found through a
// map from a 64-bit hash of its Scope to its slot (records whose Scopes share a hash are
// chained), and its variable part (Scope, token, fingerprint) is one byte slice; a done
// record's response is a second one (stored.go).

package memstore

import (
	"encoding/binary"
	"time"

	"github.com/idem-go/idem/server"
)

// slot is one record's fixed part. Times are nanoseconds since the Store's base (base.go),
// on the monotonic clock when the Store's clock has one.
type slot struct {
	hash       uint64 // of the record's Scope (Store.hash)
	next       int32  // the next slot in use whose Scope has the same hash, or -1
	gen        uint32 // bumped when the slot is freed: a deadline queued for a former record does not match
	used       bool
	done       bool
	leaseUntil int64
	expires    int64
	scopeEnd   int // data[:scopeEnd] is the Scope (appendScope)
	tokenEnd   int // data[scopeEnd:tokenEnd] is the token; the fingerprint follows
	// A done record's response (stored.go): its status, and where its unreplayable reason
	// and header fields end in resps[i].
	status    int
	unrEnd    int
	headerEnd int
}

// recVars is one record's variable part, in its own array: the slots hold no pointers.
type recVars struct {
	data []byte // the Scope, token and fingerprint (recordData)
	resp []byte // the response once done (stored.go)
}

// appendScope appends sc's fields, each after its length as a uvarint, to b.
func appendScope(b []byte, sc server.Scope) []byte {
	for _, f := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// scopeIs reports whether enc, made by appendScope, is sc's.
func scopeIs(enc []byte, sc server.Scope) bool {
	for _, f := range [...]string{sc.Identity, sc.Method, sc.Path, sc.Key} {
		n, w := binary.Uvarint(enc)
		if w <= 0 || n != uint64(len(f)) || uint64(len(enc)-w) < n || string(enc[w:w+len(f)]) != f {
			return false
		}
		enc = enc[w+len(f):]
	}
	return len(enc) == 0
}

// recordData is a new record's variable part: sc, then token, then fingerprint. Its first
// tokenEnd bytes are also the key of token in Store.released.
func recordData(sc server.Scope, token, fingerprint string) (data []byte, scopeEnd, tokenEnd int) {
	n := 4*binary.MaxVarintLen64 + len(sc.Identity) + len(sc.Method) + len(sc.Path) + len(sc.Key)
	data = appendScope(make([]byte, 0, n+len(token)+len(fingerprint)), sc)
	scopeEnd = len(data)
	data = append(data, token...)
	tokenEnd = len(data)
	return append(data, fingerprint...), scopeEnd, tokenEnd
}

// hash returns sc's hash under the Store's seed; two Scopes that differ in any field
// hash apart but by chance.
func (s *Store) hash(sc server.Scope) uint64 {
	return sc.Hash(s.seed)
}

// find returns the slot of the record for sc, whose hash is h, expired or not, or -1.
// Called with mu held.
func (s *Store) find(sc server.Scope, h uint64) int32 {
	i, ok := s.index[h]
	if !ok {
		return -1
	}
	for ; i >= 0; i = s.slots.at(i).next {
		if scopeIs(s.vars.at(i).data[:s.slots.at(i).scopeEnd], sc) {
			return i
		}
	}
	return -1
}

// live returns the slot of the record for sc unless it is missing or expired at now, or
// -1. Called with mu held.
func (s *Store) live(sc server.Scope, h uint64, now int64) int32 {
	i := s.find(sc, h)
	if i < 0 || now >= s.slots.at(i).expires {
		return -1
	}
	return i
}

// insert puts a record in a free slot, with the hash h, and returns the slot. Called with
// mu held; no record for its Scope may be in use.
func (s *Store) insert(h uint64, data []byte, scopeEnd, tokenEnd int, leaseUntil, expires int64) int32 {
	var i int32
	if n := len(s.free); n > 0 {
		i, s.free = s.free[n-1], s.free[:n-1]
	} else {
		i = s.slots.add()
		s.vars.add()
	}
	next, ok := s.index[h]
	if !ok {
		next = -1
	}
	sl := s.slots.at(i)
	*sl = slot{hash: h, next: next, gen: sl.gen, used: true, leaseUntil: leaseUntil, expires: expires,
		scopeEnd: scopeEnd, tokenEnd: tokenEnd}
	s.vars.at(i).data = data
	s.index[h] = i
	s.inUse++
	return i
}

// remove deletes the record in slot i and frees the slot. Called with mu held.
func (s *Store) remove(i int32) {
	sl := s.slots.at(i)
	if head := s.index[sl.hash]; head == i {
		if sl.next < 0 {
			delete(s.index, sl.hash)
		} else {
			s.index[sl.hash] = sl.next
		}
	} else {
		p := head
		for s.slots.at(p).next != i {
			p = s.slots.at(p).next
		}
		s.slots.at(p).next = sl.next
	}
	*sl = slot{next: -1, gen: sl.gen + 1}
	*s.vars.at(i) = recVars{}
	s.free = append(s.free, i)
	s.inUse--
}

// token is the token of the record in slot i: the holder's while in progress, the
// completer's once done.
func (s *Store) token(i int32) []byte {
	sl := s.slots.at(i)
	return s.vars.at(i).data[sl.scopeEnd:sl.tokenEnd]
}

// view is the record in slot i as server.Store reports it at now.
func (s *Store) view(i int32, now int64) (server.Record, error) {
	sl := s.slots.at(i)
	v := server.Record{Fingerprint: string(s.vars.at(i).data[sl.tokenEnd:]), ExpiresIn: time.Duration(sl.expires - now)}
	if sl.done {
		resp, err := s.response(i)
		v.State, v.Response = server.StateDone, resp
		return v, err
	}
	v.State, v.Token, v.LeaseLeft = server.StateInProgress, string(s.token(i)), time.Duration(sl.leaseUntil-now)
	return v, nil
}
