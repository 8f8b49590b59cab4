// This file writes a Record's metadata in the JSON form journals before
// version 10 were written in (record_binary.go writes the form of today),
// without reflection, byte for byte as encoding/json writes it
// (record_json_test.go holds the two side by side): the records of older
// journals, which record_parse.go still reads.

package boltjournal

import (
	"encoding/base64"

	"github.com/idem-go/idem/internal/recordjson"
)

// appendJSON appends r as json.Marshal(storedRecord{r, box}) would: its JSON
// form, then box as the field "sealed" when box is not empty.
func appendJSON(r *Record, b, box []byte) ([]byte, error) {
	b, err := recordjson.Append(b, r, recordjson.Whole)
	if err != nil || len(box) == 0 {
		return b, err
	}
	b = append(b[:len(b)-1], `,"sealed":"`...)
	b = base64.StdEncoding.AppendEncode(b, box)
	return append(b, `"}`...), nil
}
