// This file holds the contract floor middleware: a floor doing the work
// idem's server contract asks of any middleware (DESIGN: server middleware),
// and nothing more. The key is scoped by the caller's identity (hashed: no
// credential is kept), method and path; the request's fingerprint is of its
// canonical JSON (server.DefaultFingerprint), and a repeat with another is
// refused 422; each claim mints a token that its completion must match
// (fencing); the record carries a lease, and the handler's context ends at
// its deadline, not when the client leaves; the whole answer (status, every
// header, body) is stored and replayed; records expire after the TTL. What
// it leaves out is idem's own work around that: renewing the lease (no
// handler here outlives one), the Observer and logs, Retry-After from
// handler durations, repeating a store call whose outcome is unknown, the
// outcome rules (5xx, panics, Recover). So "idem X ÷ contract floor X" is
// idem's own work over store X, and "contract floor X ÷ floor X" the work of
// the contract. floor_mem_contract.go, floor_redis_contract.go and
// floor_pg_contract.go are its keepers.

package serverbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/idem-go/idem/server"
)

// maxContractBody bounds the body the contract floor reads, as
// server.Options.MaxBodyBytes does idem's.
const maxContractBody = 1 << 20

// contractKeeper claims scopes and keeps their records for a contract floor.
// The contexts it is given do not end when a client leaves.
type contractKeeper interface {
	// claim makes scope's record, with fingerprint fp, leased to token, unless
	// a live one is there: then claimed is false and held is that record's
	// fingerprint and answer (nil while its handler runs).
	claim(ctx context.Context, scope, fp, token string) (held contractRecord, claimed bool, err error)
	// complete stores a in scope's record, whose fingerprint is fp, if it
	// is still token's: a late completion by a holder whose record was taken
	// over changes nothing.
	complete(ctx context.Context, scope, fp, token string, a *contractAnswer) error
}

// contractRecord is what a claim that lost finds of the record.
type contractRecord struct {
	fingerprint string
	answer      *contractAnswer // nil while its handler runs
}

// contractAnswer is a stored answer, whole.
type contractAnswer struct {
	status int
	header http.Header
	body   []byte
}

// contractFloor is safe for concurrent use if its keeper is.
type contractFloor struct {
	next   http.Handler
	k      contractKeeper
	lease  time.Duration // the handler's context ends this long after the claim
	prefix string        // starts every scope the keeper sees (Redis's run prefix); "" for none
	// storeTimeout bounds each call to a keeper that may wait on the network,
	// so that an outage fails closed rather than hanging; 0 for none (memory).
	storeTimeout time.Duration
}

func (f *contractFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(keyHeader)
	if key == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	body, err := readContractBody(r)
	if err != nil {
		http.Error(w, "the request body could not be read", http.StatusBadRequest)
		return
	}
	fp, err := server.DefaultFingerprint(r, body)
	if err != nil {
		http.Error(w, "the request body is not valid JSON", http.StatusBadRequest)
		return
	}
	// The store is called without the request's cancellation, the handler
	// too: a client's leaving cuts neither short.
	ctx := context.WithoutCancel(r.Context())
	scope, token, claimedAt := f.prefix+scopeKey(r, key), rand.Text(), time.Now()
	var held contractRecord
	var claimed bool
	err = f.call(ctx, func(ctx context.Context) (err error) {
		held, claimed, err = f.k.claim(ctx, scope, fp, token)
		return err
	})
	switch {
	case err != nil:
		unavailable(w)
		return
	case claimed:
	case held.fingerprint != fp:
		http.Error(w, "this Idempotency-Key was used with another request", http.StatusUnprocessableEntity)
		return
	case held.answer == nil:
		conflict(w)
		return
	default:
		replayAnswer(w, held.answer)
		return
	}
	hctx, cancel := context.WithDeadline(ctx, claimedAt.Add(f.lease))
	defer cancel()
	r2 := r.WithContext(hctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	c := &answerCapture{ResponseWriter: w}
	f.next.ServeHTTP(c, r2)
	a := c.answer()
	f.call(ctx, func(ctx context.Context) error { // an error leaves the record in progress until it expires
		return f.k.complete(ctx, scope, fp, token, a)
	})
}

// call calls the keeper through do, bounded by storeTimeout if it has one.
func (f *contractFloor) call(ctx context.Context, do func(context.Context) error) error {
	if f.storeTimeout == 0 {
		return do(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, f.storeTimeout)
	defer cancel()
	return do(ctx)
}

// readContractBody reads r's body whole, up to maxContractBody.
func readContractBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > maxContractBody {
		return nil, errContractBody
	}
	if r.ContentLength >= 0 {
		b := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxContractBody+1))
	if err == nil && len(b) > maxContractBody {
		err = errContractBody
	}
	return b, err
}

var (
	errContractBody   = errors.New("serverbench: a request body over the contract floor's limit")
	errContractRecord = errors.New("serverbench: a stored record not in the contract floor's form")
)

// scopeKey names key's record: the SHA-256 of the caller's credentials, the
// method, the path and the key, as the contract scopes a key, apart by
// spaces, which none but the last (the key) can hold.
func scopeKey(r *http.Request, key string) string {
	sum := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return hex.EncodeToString(sum[:]) + " " + r.Method + " " + r.URL.EscapedPath() + " " + key
}

// answerCapture passes the handler's answer through to its client and keeps
// it whole: its status, its header as sent, and its body.
type answerCapture struct {
	http.ResponseWriter
	status int
	header http.Header
	body   []byte
}

func (c *answerCapture) WriteHeader(status int) {
	if c.status == 0 {
		c.status, c.header = status, c.Header().Clone()
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *answerCapture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.body = append(c.body, p...)
	return c.ResponseWriter.Write(p)
}

// answer returns the answer written so far, as stored.
func (c *answerCapture) answer() *contractAnswer {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	return &contractAnswer{status: c.status, header: c.header, body: c.body}
}

// replayAnswer writes a stored answer to w, marked as a replay.
func replayAnswer(w http.ResponseWriter, a *contractAnswer) {
	h := w.Header()
	for k, v := range a.header {
		h[k] = slices.Clone(v)
	}
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// encode appends a's stored form to b: its status in three digits, a line
// "name: value" per header value, an empty line, then the body.
func (a *contractAnswer) encode(b []byte) []byte {
	b = strconv.AppendInt(b, int64(a.status), 10)
	b = append(b, '\n')
	for k, vs := range a.header {
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), '\n')
		}
	}
	return append(append(b, '\n'), a.body...)
}

// decodeAnswer returns the answer whose stored form (encode's) is b.
func decodeAnswer(b []byte) (*contractAnswer, error) {
	status, rest, ok := bytes.Cut(b, []byte{'\n'})
	n, err := strconv.Atoi(string(status))
	if !ok || err != nil || n < 200 || n > 999 {
		return nil, errContractRecord
	}
	a := &contractAnswer{status: n, header: http.Header{}}
	for {
		var line []byte
		if line, rest, ok = bytes.Cut(rest, []byte{'\n'}); !ok {
			return nil, errContractRecord
		}
		if len(line) == 0 {
			a.body = rest
			return a, nil
		}
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			return nil, errContractRecord
		}
		a.header[string(k)] = append(a.header[string(k)], string(v))
	}
}
