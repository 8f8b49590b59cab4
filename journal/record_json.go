// This file holds RecordJSON, the one JSON form of a Record: the form
// boltjournal's journals before version 10 hold, pgjournal's jsonb column
// (less the fields it keeps in columns) and what "idem journal show" prints
// (with fields of its own). Each of them embeds RecordJSON and states what it
// adds or hides beside it.

package journal

import (
	"net/http"
	"time"
)

// RecordJSON is a Record as encoding/json writes and reads it, under these
// field names: times in RFC 3339 with nanoseconds, State as its number,
// BodySHA256 always (empty in a record sealed under a key, whose hash is in
// its sealed part). It leaves out the body, Sealed and the Store's Ref:
// where they are kept, if at all, is the embedder's business.
//
// A struct that embeds it may hide one of its fields with a field of the
// same JSON name (encoding/json takes the shallower one), to write it in
// another form or, left empty under omitempty, not at all. Such a hidden
// field moves in the output: encoding/json writes the embedder's own fields
// where they stand in its struct.
type RecordJSON struct {
	Key             string      `json:"key"`
	OperationID     string      `json:"op,omitempty"`
	Method          string      `json:"method"`
	URL             string      `json:"url"`
	Host            string      `json:"host,omitempty"`
	Header          http.Header `json:"header,omitempty"`
	Dropped         []string    `json:"dropped,omitempty"`
	DroppedQuery    []string    `json:"dropped_query,omitempty"`
	CallerKey       bool        `json:"caller_key,omitempty"`
	Identity        string      `json:"identity,omitempty"`
	CredentialTag   string      `json:"cred,omitempty"`
	ContentType     string      `json:"content_type,omitempty"`
	ContentEncoding string      `json:"content_encoding,omitempty"`
	BodySHA256      string      `json:"sha256"`
	Created         time.Time   `json:"created"`
	State           State       `json:"state"`
	Attempts        int         `json:"attempts"`
	LastAttempt     time.Time   `json:"last_attempt,omitzero"`
	NextAttempt     time.Time   `json:"next_attempt,omitzero"`
	Status          int         `json:"status,omitempty"`
	LastError       string      `json:"last_error,omitempty"`
	Updated         time.Time   `json:"updated"`
	EncryptionKeyID string      `json:"kid,omitempty"`
	Location        string      `json:"location,omitempty"`
}

// JSONOf returns the JSON form of r. It shares r's header and slices.
func JSONOf(r *Record) RecordJSON {
	return RecordJSON{Key: r.Key, OperationID: r.OperationID, Method: r.Method, URL: r.URL,
		Host: r.Host, Header: r.Header, Dropped: r.Dropped, DroppedQuery: r.DroppedQuery,
		CallerKey: r.CallerKey, Identity: r.Identity, CredentialTag: r.CredentialTag,
		ContentType: r.ContentType, ContentEncoding: r.ContentEncoding, BodySHA256: r.BodySHA256,
		Created: r.Created, State: r.State, Attempts: r.Attempts, LastAttempt: r.LastAttempt,
		NextAttempt: r.NextAttempt, Status: r.Status, LastError: r.LastError, Updated: r.Updated,
		EncryptionKeyID: r.EncryptionKeyID, Location: r.Location}
}

// Record returns the record j is the JSON form of: no body, not Sealed, the
// zero Ref. It shares j's header and slices.
func (j *RecordJSON) Record() *Record {
	return &Record{Key: j.Key, OperationID: j.OperationID, Method: j.Method, URL: j.URL,
		Host: j.Host, Header: j.Header, Dropped: j.Dropped, DroppedQuery: j.DroppedQuery,
		CallerKey: j.CallerKey, Identity: j.Identity, CredentialTag: j.CredentialTag,
		ContentType: j.ContentType, ContentEncoding: j.ContentEncoding, BodySHA256: j.BodySHA256,
		Created: j.Created, State: j.State, Attempts: j.Attempts, LastAttempt: j.LastAttempt,
		NextAttempt: j.NextAttempt, Status: j.Status, LastError: j.LastError, Updated: j.Updated,
		EncryptionKeyID: j.EncryptionKeyID, Location: j.Location}
}
