// This file holds Record, one operation as the journal stores it, and its
// encoding.

package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// State is where an operation is in its life.
type State uint8

const (
	// Pending: the outcome is not known yet; Resume will send it again.
	Pending State = iota + 1
	// Settled: a final response was received.
	Settled
	// Expired: pending for longer than KeyTTL; never re-sent blindly.
	Expired
	// Failed: failed permanently before the server could have acted.
	Failed
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Settled:
		return "settled"
	case Expired:
		return "expired"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", s)
}

// Record is one operation in the journal. Records returned by the Journal are
// copies; changing them changes nothing on disk.
type Record struct {
	ID          uint64      `json:"-"` // journal sequence number, in creation order (the bbolt key)
	Key         string      `json:"key"`
	OperationID string      `json:"op,omitempty"`
	Method      string      `json:"method"`
	URL         string      `json:"url"`                  // without userinfo
	Host        string      `json:"host,omitempty"`       // the request's Host override, if any
	Header      http.Header `json:"header,omitempty"`     // without sensitive headers and the key
	Dropped     []string    `json:"dropped,omitempty"`    // names (never values) of sensitive headers not written
	CallerKey   bool        `json:"caller_key,omitempty"` // the caller chose Key (else idem minted it)
	Body        []byte      `json:"-"`                    // stored raw in its own bucket; dropped once settled
	BodySHA256  string      `json:"sha256"`               // hex, of the body as sent
	Created     time.Time   `json:"created"`              // written ahead, just before the first attempt: KeyTTL counts from it
	State       State       `json:"state"`
	// Attempts counts the attempts whose outcome was recorded. Attempts cut
	// short by a crash are not counted, nor net/http's own single re-send on a
	// dead keep-alive connection (same key, same bytes).
	Attempts    int       `json:"attempts"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // earliest time Resume may send it
	Status      int       `json:"status,omitempty"`      // last or final status code
	LastError   string    `json:"last_error,omitempty"`
	Updated     time.Time `json:"updated"` // last state change; drives pruning
}

// fingerprint identifies the request an operation stands for, so a reused
// operation ID with a different request is refused.
func fingerprint(method, url string, body []byte) (bodySum string, fp string) {
	b := sha256.Sum256(body)
	bodySum = hex.EncodeToString(b[:])
	return bodySum, method + " " + url + " " + bodySum
}

func (r *Record) fingerprint() string {
	return r.Method + " " + r.URL + " " + r.BodySHA256
}

// indexKeys are the index entries naming the record: its operation ID and a
// caller's key. A key idem minted is not indexed: nobody can look it up.
func (r *Record) indexKeys() [][]byte {
	var keys [][]byte
	if r.CallerKey {
		keys = append(keys, []byte("k\x00"+r.Key))
	}
	if r.OperationID != "" {
		keys = append(keys, []byte("o\x00"+r.OperationID))
	}
	return keys
}

// stored is the record as written: a settled one without headers (its body
// is dropped too).
func (r *Record) stored() *Record {
	if r.State != Settled {
		return r
	}
	c := *r
	c.Body, c.Header = nil, nil
	return &c
}

func idKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, id)
}

// encode is the record's metadata as JSON. The body is stored apart, raw,
// in the bodies bucket (journal.go).
func (r *Record) encode() ([]byte, error) { return json.Marshal(r) }

func decodeRecord(b []byte) (*Record, error) {
	r := new(Record)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, err
	}
	return r, nil
}
