// This file holds what the three floor middlewares share: reading the key,
// keeping a copy of the handler's answer as it is written, and the stored
// form of an answer (status, Content-Type, body) they replay to a repeated
// key. A floor is the least an idempotency layer does: claim the key
// atomically, run the handler, store its answer, replay it; no fingerprint,
// no lease, no recovery. floor_mem.go, floor_redis.go and floor_pg.go claim
// and store in their own way.

package serverbench

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
)

const keyHeader = "Idempotency-Key"

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
