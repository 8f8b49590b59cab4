package main

import (
	"bytes"
	"testing"
)

func TestFloorRecordRoundTrip(t *testing.T) {
	body := []byte("{\"a\":1}\nsecond line")
	method, url, ct, got, ok := parseFloorRecord(floorRecord("POST", "http://127.0.0.1:1/held", "application/json", body))
	if !ok || method != "POST" || url != "http://127.0.0.1:1/held" || ct != "application/json" || !bytes.Equal(got, body) {
		t.Errorf("parseFloorRecord(floorRecord(...)) = %q %q %q %q %v", method, url, ct, got, ok)
	}
	if _, _, _, _, ok := parseFloorRecord([]byte("POST\nhttp://x")); ok {
		t.Error("parseFloorRecord accepted a record without its content type line")
	}
}
