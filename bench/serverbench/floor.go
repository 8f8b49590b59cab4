// This file holds the floor middleware the three floors share: reading the
// key, keeping a copy of the handler's answer as it is written, and the
// stored form of an answer (status, Content-Type, body) they replay to a
// repeated key. A floor is the least an idempotency layer does: claim the
// key atomically, run the handler, store its answer, replay it; no
// fingerprint, no lease, no recovery. floor_mem.go, floor_redis.go and
// floor_pg.go are its keepers: they claim and store in their own way.

package serverbench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
)

const keyHeader = "Idempotency-Key"

// keeper claims keys and keeps their answers for a floor.
type keeper interface {
	// claim claims key for this request. If another request holds it,
	// claimed is false and stored is its answer: nil while its handler runs,
	// or if it is gone since. err is the store's failure.
	claim(ctx context.Context, key string) (claimed bool, stored []byte, err error)
	// complete stores the answer of a key this request claimed, even if
	// ctx is cancelled (its client left).
	complete(ctx context.Context, key string, stored []byte)
}

// floor is a floor middleware over its keeper; it is safe for concurrent use
// if the keeper is.
type floor struct {
	next   http.Handler
	k      keeper
	prefix string // starts every key the keeper sees (Redis's run prefix); "" for none
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(keyHeader)
	if key == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	key = f.prefix + key // no copy if prefix is ""
	claimed, stored, err := f.k.claim(r.Context(), key)
	switch {
	case err != nil:
		unavailable(w)
		return
	case !claimed && stored == nil:
		conflict(w) // in progress, or gone since the claim failed
		return
	case !claimed:
		replay(w, stored)
		return
	}
	c := &capture{ResponseWriter: w}
	f.next.ServeHTTP(c, r)
	f.k.complete(r.Context(), key, c.stored())
}

// capture passes the handler's answer through to its client and keeps a
// copy of its status and body.
type capture struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, p...)
	return c.ResponseWriter.Write(p)
}

// stored returns the answer in its stored form: "<status> <Content-Type>\n<body>".
func (c *capture) stored() []byte {
	ctype := c.Header().Get("Content-Type")
	b := make([]byte, 0, 5+len(ctype)+len(c.body))
	b = strconv.AppendInt(b, int64(max(c.status, http.StatusOK)), 10)
	b = append(b, ' ')
	b = append(b, ctype...)
	b = append(b, '\n')
	return append(b, c.body...)
}

var errStoredForm = errors.New("serverbench: a stored answer not in the floor's form")

// replay writes a stored answer (capture.stored's form) to w.
func replay(w http.ResponseWriter, stored []byte) error {
	head, body, ok := bytes.Cut(stored, []byte{'\n'})
	if !ok || len(head) < 4 || head[3] != ' ' {
		return errStoredForm
	}
	status, err := strconv.Atoi(string(head[:3]))
	if err != nil {
		return errStoredForm
	}
	if ctype := string(head[4:]); ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(status)
	_, err = w.Write(body)
	return err
}

// conflict answers a copy that arrived while its key's handler runs.
func conflict(w http.ResponseWriter) {
	http.Error(w, "a request with this Idempotency-Key is in progress", http.StatusConflict)
}

// unavailable answers a request whose claim could not be made or read.
func unavailable(w http.ResponseWriter) {
	http.Error(w, "the idempotency store failed", http.StatusServiceUnavailable)
}
