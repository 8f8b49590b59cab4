// Package recordjsontest makes random records for the tests of the record
// codecs (recordjson, boltjournal's binary and JSON forms): every field set
// or not, strings that take every escape encoding/json makes, times zero, in
// UTC, in a zone of their own or with a monotonic reading.
package recordjsontest

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/idem-go/idem/journal"
)

// Awkward are strings that exercise every escape encoding/json makes.
var Awkward = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "ключ €", "\xff\xfe invalid", "\u2028 and \u2029", "🙂", "a\xc3",
	"https://api.test/p?a=1&b=<2>#frag",
}

// Record returns a random record drawn with rng.
func Record(rng *rand.Rand) *journal.Record {
	pick := func() string { return Awkward[rng.IntN(len(Awkward))] }
	when := func() time.Time {
		switch rng.IntN(4) {
		case 0:
			return time.Time{}
		case 1:
			return time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)).UTC()
		case 2:
			return time.Unix(rng.Int64N(1<<33), 0).In(time.FixedZone("x", 5*3600+30*60))
		}
		return time.Now() // with a monotonic reading, in Local
	}
	r := &journal.Record{Key: pick(), Method: pick(), URL: pick(), BodySHA256: pick(),
		Created: when(), Updated: when(), LastAttempt: when(), NextAttempt: when(),
		State: journal.State(rng.IntN(6)), Attempts: rng.IntN(100) - 5, Status: rng.IntN(700) - 50}
	if rng.IntN(2) == 0 {
		r.OperationID, r.Host, r.LastError, r.EncryptionKeyID, r.Location = pick(), pick(), pick(), pick(), pick()
		r.CallerKey = true
		r.Identity, r.CredentialTag, r.ContentType, r.ContentEncoding = pick(), pick(), pick(), pick()
		r.Header = http.Header{pick(): {pick(), pick()}, pick(): nil, "X-Empty": {}}
		r.Dropped, r.DroppedQuery = []string{pick()}, []string{pick(), pick()}
	}
	if rng.IntN(4) == 0 {
		r.Header, r.Dropped = http.Header{}, []string{}
	}
	return r
}

// Bytes returns random bytes drawn with rng, empty one time in three.
func Bytes(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return ""
	}
	b := make([]byte, rng.IntN(80))
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return string(b)
}
