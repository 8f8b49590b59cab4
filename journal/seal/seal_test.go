// Tests for the Ring and the record rule on their own: what is sealed and
// what stays readable, the errors for an unknown or a wrong key, bindings
// to the record, and keyrings refused up front. The Stores' own behaviour
// with sealed records is journaltest's (Config.Seal).

package seal

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func ring(t *testing.T, k *Keyring) *Ring {
	t.Helper()
	r, err := NewRing(k)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func record() *journal.Record {
	body := []byte(`{"card":"4111111111111111"}`)
	return &journal.Record{Key: "key-1", OperationID: "op-1", Method: http.MethodPost,
		URL: "https://api.test/v1/payments?pan=4111", Location: "https://api.test/v2/payments?pan=4111",
		Header: http.Header{"X-Card": {"4111"}}, Dropped: []string{"Authorization"}, Identity: "tenant-a",
		CredentialTag: "00ff", ContentType: "application/json", ContentEncoding: "gzip", Body: body,
		BodySHA256: journal.BodySum(body), Created: time.Unix(1, 0), State: journal.StatePending,
		EncryptionKeyID: "A"}
}

func TestRequestRoundTrip(t *testing.T) {
	r := ring(t, &Keyring{Current: "A", Keys: map[string][]byte{"A": key(1)}})
	rec := record()
	plain, box, err := r.SealRequest(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if HoldsRequest(&plain) {
		t.Fatalf("SealRequest left request fields in the clear: %+v", plain)
	}
	if plain.URL != "https://api.test/v1/payments" || plain.Location != "https://api.test/v2/payments" ||
		plain.Key != rec.Key || plain.OperationID != rec.OperationID || plain.Method != rec.Method {
		t.Fatalf("SealRequest did not keep what stays readable: %+v", plain)
	}
	if bytes.Contains(box, []byte("4111")) || bytes.Contains(box, []byte("tenant-a")) {
		t.Fatal("the box holds request bytes in the clear")
	}
	if rec.Header == nil || !strings.Contains(rec.URL, "?") {
		t.Fatal("SealRequest changed its argument")
	}
	body, err := r.SealBody(rec)
	if err != nil {
		t.Fatal(err)
	}
	got := plain
	got.Body = nil
	if _, err := r.OpenRequest(&got, box); err != nil {
		t.Fatal(err)
	}
	if got.Body, err = r.OpenBody(&got, 0, body); err != nil {
		t.Fatal(err)
	}
	if got.URL != rec.URL || got.Location != rec.Location || got.Header.Get("X-Card") != "4111" ||
		got.Identity != rec.Identity || got.CredentialTag != rec.CredentialTag || got.ContentType != rec.ContentType ||
		got.ContentEncoding != rec.ContentEncoding || got.BodySHA256 != rec.BodySHA256 || !bytes.Equal(got.Body, rec.Body) {
		t.Fatalf("opened %+v, want %+v", got, rec)
	}
}

func TestOpenErrors(t *testing.T) {
	a1 := ring(t, &Keyring{Current: "A", Keys: map[string][]byte{"A": key(1)}})
	a2 := ring(t, &Keyring{Current: "A", Keys: map[string][]byte{"A": key(2)}})
	b := ring(t, &Keyring{Current: "B", Keys: map[string][]byte{"B": key(1)}})
	rec := record()
	plain, box, err := a1.SealRequest(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	sealedBody, err := a1.SealBody(rec)
	if err != nil {
		t.Fatal(err)
	}
	moved := plain
	moved.Key = "key-2"
	for _, tc := range []struct {
		name string
		r    *Ring
		rec  journal.Record
		box  []byte
		want error
	}{
		{"no ring", nil, plain, box, journal.ErrUnknownEncryptionKey},
		{"key ID missing", b, plain, box, journal.ErrUnknownEncryptionKey},
		{"other key under the ID", a2, plain, box, journal.ErrDecrypt},
		{"byte flipped", a1, plain, flip(box), journal.ErrDecrypt},
		{"truncated", a1, plain, box[:5], journal.ErrDecrypt},
		{"moved to another record", a1, moved, box, journal.ErrDecrypt},
		{"a body for a request part", a1, plain, sealedBody, journal.ErrDecrypt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.rec
			_, err := tc.r.OpenRequest(&got, tc.box)
			if !errors.Is(err, tc.want) {
				t.Fatalf("OpenRequest: %v, want %v", err, tc.want)
			}
			other := journal.ErrDecrypt
			if tc.want == journal.ErrDecrypt {
				other = journal.ErrUnknownEncryptionKey
			}
			if errors.Is(err, other) {
				t.Fatalf("OpenRequest: %v matches %v too", err, other)
			}
			if !strings.Contains(err.Error(), `"A"`) {
				t.Fatalf("OpenRequest: %v does not name the key ID", err)
			}
			if got.URL != plain.URL || got.Header != nil {
				t.Fatalf("a failed OpenRequest changed the record: %+v", got)
			}
		})
	}
	if _, err := a2.OpenBody(rec, 0, sealedBody); !errors.Is(err, journal.ErrDecrypt) {
		t.Fatalf("OpenBody under another key: %v, want ErrDecrypt", err)
	}
	if _, err := b.SealBody(rec); !errors.Is(err, journal.ErrUnknownEncryptionKey) {
		t.Fatalf("SealBody under a key ID the ring lacks: %v, want ErrUnknownEncryptionKey", err)
	}
}

func flip(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)-1] ^= 1
	return b
}

func TestSegments(t *testing.T) {
	r := ring(t, &Keyring{Current: "A", Keys: map[string][]byte{"A": key(1)}})
	rec := record()
	rec.Body = bytes.Repeat([]byte("0123456789"), 10)
	var stored []byte
	var err error
	for i, off := 0, 0; off < len(rec.Body); i, off = i+1, off+32 {
		end := min(off+32, len(rec.Body))
		if stored, err = r.SealSegment(stored, rec, i, rec.Body[off:end], end == len(rec.Body)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.OpenBody(rec, 32, stored)
	if err != nil || !bytes.Equal(got, rec.Body) {
		t.Fatalf("OpenBody of parts = %q, %v", got, err)
	}
	box := 32 + 1 + 16 + 12 // a part, its version byte, GCM tag and nonce
	if _, err := r.OpenBody(rec, 32, stored[:len(stored)-(len(stored)%box)]); !errors.Is(err, journal.ErrDecrypt) {
		t.Fatalf("OpenBody without its last part: %v, want ErrDecrypt", err)
	}
}

func TestNewRingRefuses(t *testing.T) {
	good := key(1)
	for _, tc := range []struct {
		name string
		k    *Keyring
	}{
		{"no keys", &Keyring{Current: "k"}},
		{"current missing", &Keyring{Current: "x", Keys: map[string][]byte{"k": good}}},
		{"key ID with a space", &Keyring{Current: "k 1", Keys: map[string][]byte{"k 1": good}}},
		{"key too short", &Keyring{Current: "k", Keys: map[string][]byte{"k": good[:16]}}},
		{"old key bad", &Keyring{Current: "k", Keys: map[string][]byte{"k": good, "old": {1, 2, 3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.k.Validate(); !errors.Is(err, journal.ErrInvalidOptions) || !strings.Contains(err.Error(), "Encryption") {
				t.Fatalf("Validate: %v, want ErrInvalidOptions naming Encryption", err)
			}
		})
	}
	if r, err := NewRing(nil); r != nil || err != nil {
		t.Fatalf("NewRing(nil) = %v, %v; want nil, nil", r, err)
	}
}

func TestRingCopiesKeys(t *testing.T) {
	k := key(1)
	kr := &Keyring{Current: "A", Keys: map[string][]byte{"A": k}}
	r := ring(t, kr)
	rec := record()
	sealed, err := r.SealBody(rec)
	if err != nil {
		t.Fatal(err)
	}
	clear(k)
	kr.Current = "gone"
	if got, err := r.OpenBody(rec, 0, sealed); err != nil || !bytes.Equal(got, rec.Body) {
		t.Fatalf("OpenBody after the Keyring changed = %q, %v", got, err)
	}
	if r.Current() != "A" {
		t.Fatalf("Current = %q after the Keyring changed, want A", r.Current())
	}
}
