package pgjournal

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idem-go/idem/internal/recordjson/recordjsontest"
	"github.com/idem-go/idem/journal"
)

// The record column is what encoding/json writes for recordJSON, the struct
// the column is read back into: settled records without their headers, a NUL
// in LastError as U+FFFD (jsonb refuses \u0000).
func TestRecordColumnIsEncodingJSONs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		rec := recordjsontest.Record(rng)
		rec.EncryptionKeyID = "" // sealing has tests of its own (seal_test.go)
		if i%3 == 0 {
			rec.LastError = "a \x00 in " + rec.LastError
		}
		got, box, err := encode(nil, rec)
		if err != nil || box != nil {
			t.Fatalf("record %d: encode: %v, box %q", i, err, box)
		}
		c := *rec
		if c.State == journal.StateSettled {
			c.Header = nil
		}
		c.LastError = strings.ReplaceAll(c.LastError, "\x00", "\uFFFD")
		want, err := json.Marshal(recordJSON{RecordJSON: journal.JSONOf(&c)})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
		var back recordJSON
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("record %d: the column does not read back: %v", i, err)
		}
		if strings.Contains(back.LastError, "\x00") {
			t.Fatalf("record %d: a NUL in LastError was written: %q", i, back.LastError)
		}
	}
}
