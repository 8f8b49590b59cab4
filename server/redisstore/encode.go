// encode.go turns what the scripts (scripts.go) store and return into server types and
// back: the reply of a claim that found a record, tokens and durations in milliseconds
// (header fields are server.AppendHeader's).

package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idem-go/idem/server"
)

// errCorrupt is wrapped by the error for a record the Store cannot read back: written by
// something else, or by an incompatible version. The middleware fails closed on it.
var errCorrupt = errors.New("redisstore: corrupt record")

// decodeRecord reads the reply of claimScript that found a record: {0, lease left ms,
// PTTL ms, st, fp, tok, status, hdr, body, unrep}.
func decodeRecord(reply []any) (server.Record, error) {
	if len(reply) != 10 {
		return server.Record{}, fmt.Errorf("%w: claim reply of %d elements", errCorrupt, len(reply))
	}
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
