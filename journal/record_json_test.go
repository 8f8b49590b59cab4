package journal

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RecordJSON has a field, of the same type, for every field of Record but
// those it leaves out: a field added to Record is either written or left out
// on purpose.
func TestRecordJSONHasEveryRecordField(t *testing.T) {
	leftOut := map[string]bool{"Body": true, "Sealed": true, "ref": true}
	rt, jt := reflect.TypeFor[Record](), reflect.TypeFor[RecordJSON]()
	for f := range rt.Fields() {
		j, ok := jt.FieldByName(f.Name)
		if leftOut[f.Name] {
			require.False(t, ok, "RecordJSON.%s", f.Name)
			continue
		}
		require.True(t, ok, "RecordJSON has no field %s", f.Name)
		require.Equal(t, f.Type, j.Type, "RecordJSON.%s", f.Name)
	}
	require.Equal(t, rt.NumField()-len(leftOut), jt.NumField())
}

// JSONOf and RecordJSON.Record are inverses on what the form holds.
func TestRecordJSONRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 5, time.UTC)
	r := &Record{Key: "k", OperationID: "op", Method: http.MethodPost, URL: "https://x.test/p", Host: "h",
		Header: http.Header{"A": {"b"}}, Dropped: []string{"Authorization"}, DroppedQuery: []string{"token"},
		CallerKey: true, Identity: "acme", CredentialTag: "tag", ContentType: "application/json",
		ContentEncoding: "gzip", BodySHA256: "sum", Created: at, State: StateExpired, Attempts: 3,
		LastAttempt: at.Add(time.Second), NextAttempt: at.Add(time.Minute), Status: 503, LastError: "e",
		Updated: at.Add(time.Hour), EncryptionKeyID: "k1", Location: "https://y.test/p"}
	j := JSONOf(r)
	require.Equal(t, r, j.Record())
}
