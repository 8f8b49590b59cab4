// encode.go writes and reads a record's value (doc.go's "Key layout"): the claim's value
// that SET NX stores, the response's tail that completeScript appends, and the records the
// claim script returns, in this layout or the previous one (legacy.go); header fields are
// server.AppendHeader's.

package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-go/idem/server"
)

// errCorrupt is wrapped by the error for a record the Store cannot read back: written by
// something else, or by an incompatible version. The middleware fails closed on it.
var errCorrupt = errors.New("redisstore: corrupt record")

// claimValue is the value of a record in progress: "p:<len fp>:<len tok>:" fp tok, then
// off in decimal, the milliseconds between the lease's end and the key's expiry (so the
// lease left is PTTL - off, on Redis's clock, with no TIME).
func claimValue(fp, tok string, off int64) string {
	var b strings.Builder
	b.Grow(3*20 + len(fp) + len(tok))
	var n [20]byte
	b.WriteString("p:")
	b.Write(strconv.AppendInt(n[:0], int64(len(fp)), 10))
	b.WriteByte(':')
	b.Write(strconv.AppendInt(n[:0], int64(len(tok)), 10))
	b.WriteByte(':')
	b.WriteString(fp)
	b.WriteString(tok)
	b.Write(strconv.AppendInt(n[:0], off, 10))
	return b.String()
}

// doneTail is what follows fp and tok in a done record's value: "<status>:<len hdr>:<len
// unrep>:" hdr unrep body.
func doneTail(resp *server.Response) []byte {
	hdr := server.AppendHeader(nil, resp.Header)
	b := make([]byte, 0, 3*20+len(hdr)+len(resp.Unreplayable)+len(resp.Body))
	b = strconv.AppendInt(b, int64(resp.Status), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(hdr)), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(resp.Unreplayable)), 10)
	b = append(b, ':')
	b = append(b, hdr...)
	b = append(b, resp.Unreplayable...)
	return append(b, resp.Body...)
}

// decodeReply reads the reply of claimScript that found a record: {0, PTTL ms, value}, or
// the legacy branch's ten elements.
func decodeReply(reply []any) (server.Record, error) {
	if len(reply) == 10 {
		return decodeLegacy(reply)
	}
	if len(reply) != 3 {
		return server.Record{}, fmt.Errorf("%w: claim reply of %d elements", errCorrupt, len(reply))
	}
	pttl, _ := reply[1].(int64)
	v, _ := reply[2].(string)
	return decodeValue(v, pttl)
}

// decodeValue reads a record's value whose key expires in pttl ms.
func decodeValue(v string, pttl int64) (server.Record, error) {
	st, v, _ := strings.Cut(v, ":")
	nfp, v, ok1 := cutInt(v)
	ntok, v, ok2 := cutInt(v)
	if !ok1 || !ok2 || nfp+ntok > len(v) {
		return server.Record{}, fmt.Errorf("%w: value header", errCorrupt)
	}
	rec := server.Record{Fingerprint: v[:nfp], ExpiresIn: time.Duration(pttl) * time.Millisecond}
	tok, tail := v[nfp:nfp+ntok], v[nfp+ntok:]
	switch st {
	case "p":
		off, err := strconv.ParseInt(tail, 10, 64)
		if err != nil {
			return server.Record{}, fmt.Errorf("%w: lease offset %q", errCorrupt, tail)
		}
		rec.State, rec.Token = server.StateInProgress, tok
		rec.LeaseLeft = time.Duration(pttl-off) * time.Millisecond
	case "d":
		status, tail, ok1 := cutInt(tail)
		nh, tail, ok2 := cutInt(tail)
		nu, tail, ok3 := cutInt(tail)
		if !ok1 || !ok2 || !ok3 || nh+nu > len(tail) {
			return server.Record{}, fmt.Errorf("%w: response header", errCorrupt)
		}
		h, err := server.ParseHeader([]byte(tail[:nh]))
		if err != nil {
			return server.Record{}, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		rec.State = server.StateDone
		rec.Response = &server.Response{Status: status, Header: h, Unreplayable: tail[nh : nh+nu], Body: []byte(tail[nh+nu:])}
	default:
		return server.Record{}, fmt.Errorf("%w: state %q", errCorrupt, st)
	}
	return rec, nil
}

// cutInt reads a non-negative decimal ended by ':' at the start of s.
func cutInt(s string) (n int, rest string, ok bool) {
	d, rest, found := strings.Cut(s, ":")
	n, err := strconv.Atoi(d)
	return n, rest, found && err == nil && n >= 0
}

// decodeLegacy reads the legacy branch's reply for a hash record: {0, lease left ms,
// PTTL ms, st, fp, tok, status, hdr, body, unrep}.
func decodeLegacy(reply []any) (server.Record, error) {
	left, _ := reply[1].(int64)
	pttl, _ := reply[2].(int64)
	str := func(i int) string { s, _ := reply[i].(string); return s }
	rec := server.Record{Fingerprint: str(4), ExpiresIn: time.Duration(pttl) * time.Millisecond}
	switch str(3) {
	case "p":
		rec.State, rec.Token = server.StateInProgress, str(5)
		rec.LeaseLeft = time.Duration(left) * time.Millisecond
	case "d":
		status, err := strconv.Atoi(str(6))
		if err != nil {
			return server.Record{}, fmt.Errorf("%w: status %q", errCorrupt, str(6))
		}
		h, err := server.ParseHeader([]byte(str(7)))
		if err != nil {
			return server.Record{}, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		rec.State = server.StateDone
		rec.Response = &server.Response{Status: status, Header: h, Body: []byte(str(8)), Unreplayable: str(9)}
	default:
		return server.Record{}, fmt.Errorf("%w: state %q", errCorrupt, str(3))
	}
	return rec, nil
}

// ms is d in whole milliseconds, rounded up and at least 1: Redis's unit, and PEXPIRE 0
// would delete the record at once.
func ms(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}
