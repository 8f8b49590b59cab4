// This file reads a Record's metadata in the binary form record_binary.go
// writes (and documents), without trusting it: a damaged value gives
// errStored, never a panic or a read past its end.

package boltjournal

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// parseBinary reads a value appendBinary wrote, and withBody perhaps
// extended; the body is left to splitInline. Its strings, the hex ones
// written back out included, share one buffer: a copy of the metadata (the
// value may be a transaction's memory) with room after it for the hex, which
// a strings.Builder appends without moving what it already handed out.
func parseBinary(v []byte) (storedRecord, error) {
	meta, _, inline, ok := splitInline(v)
	if !ok {
		return storedRecord{}, fmt.Errorf("%w: inline body of the wrong length", errStored)
	}
	var sb strings.Builder
	sb.Grow(len(meta) + 36 + 32 + 64) // a UUID, a credential tag, a SHA-256
	sb.Write(meta)
	d := &binReader[string]{s: sb.String(), i: 1, ok: len(meta) > 0 && meta[0] == binaryTag}
	hexOf := func(n int, uuid bool) string {
		raw := d.take(n)
		if len(raw) != n {
			return ""
		}
		start := sb.Len()
		for i := 0; i < n; i++ {
			if uuid && (i == 4 || i == 6 || i == 8 || i == 10) {
				sb.WriteByte('-')
			}
			sb.WriteByte(hexDigits[raw[i]>>4])
			sb.WriteByte(hexDigits[raw[i]&0xf])
		}
		return sb.String()[start:]
	}
	r := new(Record)
	flags := d.uvarint()
	r.CallerKey = flags&flagCallerKey != 0
	if flags&flagRawKey != 0 {
		r.Key = hexOf(16, true)
	} else {
		r.Key = d.str()
	}
	r.OperationID, r.Method, r.URL, r.Host = d.str(), d.str(), d.str(), d.str()
	r.Header = d.header()
	r.Dropped, r.DroppedQuery = d.list(), d.list()
	r.Identity = d.str()
	if flags&flagRawCred != 0 {
		r.CredentialTag = hexOf(16, false)
	} else {
		r.CredentialTag = d.str()
	}
	r.ContentType, r.ContentEncoding = d.str(), d.str()
	if flags&flagRawSHA != 0 {
		r.BodySHA256 = hexOf(32, false)
	} else {
		r.BodySHA256 = d.str()
	}
	r.Created = d.time()
	r.State = State(d.byte())
	r.Attempts = d.int()
	r.LastAttempt, r.NextAttempt = d.time(), d.time()
	r.Status = d.int()
	r.LastError = d.str()
	r.Updated = d.time()
	r.EncryptionKeyID, r.Location = d.str(), d.str()
	var box []byte
	if sealed := d.str(); sealed != "" {
		box = []byte(sealed)
	}
	if !d.ok || d.i != len(d.s) || flags&^flagsKnown != 0 || inline != (flags&flagInline != 0) {
		return storedRecord{}, errStored
	}
	return storedRecord{Record: r, Box: box}, nil
}

// peekTarget returns the target of a stored value in the binary form, its
// Location if it has one, else its URL (a sealed record's part before the
// query), read in place: v's memory, nothing built. It walks the fields in
// parseBinary's order, skipping them. ok is false for a value in the JSON
// form, or damaged.
func peekTarget(v []byte) (target []byte, ok bool) {
	meta, _, _, ok := splitInline(v)
	if !ok || len(meta) == 0 || meta[0] != binaryTag {
		return nil, false
	}
	d := &binReader[[]byte]{s: meta, i: 1, ok: true}
	flags := d.uvarint()
	d.skip(flags&flagRawKey != 0, 16) // key
	d.str()                           // operation ID
	d.str()                           // method
	url := d.str()
	d.str() // host
	d.skipHeader()
	d.skipList() // dropped
	d.skipList() // dropped query
	d.str()      // identity
	d.skip(flags&flagRawCred != 0, 16)
	d.str() // content type
	d.str() // content encoding
	d.skip(flags&flagRawSHA != 0, 32)
	d.skipTime() // created
	d.byte()     // state
	d.uvarint()  // attempts
	d.skipTime() // last attempt
	d.skipTime() // next attempt
	d.uvarint()  // status
	d.str()      // last error
	d.skipTime() // updated
	d.str()      // key ID
	location := d.str()
	switch {
	case !d.ok:
		return nil, false
	case len(location) > 0:
		return location, true
	}
	return url, true
}

// binReader reads the binary form from s[i:]. Once a read fails, ok is
// false and every later read returns a zero value.
type binReader[T string | []byte] struct {
	s  T
	i  int
	ok bool
}

func (d *binReader[T]) take(n int) T {
	if !d.ok || n < 0 || n > len(d.s)-d.i {
		d.ok = false
		var none T
		return none
	}
	v := d.s[d.i : d.i+n]
	d.i += n
	return v
}

func (d *binReader[T]) byte() byte {
	if v := d.take(1); len(v) == 1 {
		return v[0]
	}
	return 0
}

func (d *binReader[T]) uvarint() uint64 {
	var v uint64
	for shift := uint(0); d.ok && d.i < len(d.s) && shift < 64; shift += 7 {
		c := d.s[d.i]
		d.i++
		if shift == 63 && c > 1 {
			break // over 64 bits
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	d.ok = false
	return 0
}

func (d *binReader[T]) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1) // as binary.Varint decodes
}

func (d *binReader[T]) int() int {
	v := d.varint()
	if v < math.MinInt || v > math.MaxInt {
		d.ok = false
		return 0
	}
	return int(v)
}

func (d *binReader[T]) str() T {
	n := d.uvarint()
	if n > uint64(len(d.s)) {
		d.ok = false
		var none T
		return none
	}
	return d.take(int(n))
}

func (d *binReader[T]) list() []string {
	n := d.uvarint()
	if n == 0 || n-1 > uint64(len(d.s)-d.i) { // each string takes a byte at least
		d.ok = d.ok && n == 0
		return nil
	}
	l := make([]string, n-1)
	for i := range l {
		l[i] = string(d.str())
	}
	return l
}

func (d *binReader[T]) header() http.Header {
	n := d.uvarint()
	if n == 0 || n > uint64(len(d.s)-d.i) {
		d.ok = d.ok && n == 0
		return nil
	}
	h := make(http.Header, n)
	for range n {
		k := string(d.str())
		h[k] = d.list()
	}
	return h
}

// skip passes over n raw bytes if raw, else over a string.
func (d *binReader[T]) skip(raw bool, n int) {
	if raw {
		d.take(n)
	} else {
		d.str()
	}
}

// skipList and skipHeader pass over what list and header read.
func (d *binReader[T]) skipList() {
	for n := d.uvarint(); n > 1 && d.ok; n-- {
		d.str()
	}
}

func (d *binReader[T]) skipHeader() {
	for n := d.uvarint(); n > 0 && d.ok; n-- {
		d.str()
		d.skipList()
	}
}

// skipTime passes over what time reads.
func (d *binReader[T]) skipTime() {
	switch d.byte() {
	case timeZero:
	case timeOffset:
		d.varint()
		d.uvarint()
		d.varint()
	default:
		d.varint()
		d.uvarint()
	}
}

func (d *binReader[T]) time() time.Time {
	kind := d.byte()
	if kind == timeZero || !d.ok {
		return time.Time{}
	}
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= 1e9 || kind > timeOffset {
		d.ok = false
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec)).UTC()
	if kind == timeOffset {
		off := d.varint()
		if off == 0 || off <= -24*3600 || off >= 24*3600 {
			d.ok = false
			return time.Time{}
		}
		// As time.Parse places an offset: in Local if Local has it then.
		if _, lo := t.In(time.Local).Zone(); int64(lo) == off {
			t = t.In(time.Local)
		} else {
			t = t.In(time.FixedZone("", int(off)))
		}
	}
	if checkTime(t) != nil {
		d.ok = false
		return time.Time{}
	}
	return t
}
