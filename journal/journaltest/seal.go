// This file checks sealing (Config.Seal), for a Store that seals records
// under a seal.Keyring as Options.Encryption asks: what it seals and keeps
// readable, key rotation, a key ID the Keyring lacks, a wrong key under a
// known ID, and a Store without its Keyring. Its rules are package seal's
// and the bbolt journal's: a record is never read, listed or written back
// with its sealed part lost, and never in plaintext in place of it.

package journaltest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
)

var sealTests = []subtest{
	{"Seal/RoundTrip", testSealRoundTrip},
	{"Seal/NothingInClear", testSealNothingInClear},
	{"Seal/Rotation", testSealRotation},
	{"Seal/UnknownKeyID", testSealUnknownKeyID},
	{"Seal/WrongKey", testSealWrongKey},
	{"Seal/KeyringGone", testSealKeyringGone},
	{"Seal/UnopenedUpdateOnlyWhilePending", testSealUnopenedUpdate},
	{"Seal/TurnedOnLater", testSealTurnedOnLater},
}

// needSeal skips t unless the Config can open a sealing Store.
func needSeal(t *testing.T, c *Config) {
	t.Helper()
	if c.Seal == nil {
		t.Skip("Config.Seal is nil: sealing is not tested")
	}
}

// openSealed opens a Store sealing under k over new storage for t, closed
// when t ends.
func openSealed(t *testing.T, c *Config, k *seal.Keyring) *store {
	t.Helper()
	needSeal(t, c)
	s := &store{Store: c.Seal(t, nil, k), t: t, c: c}
	if s.Store == nil {
		t.Fatal("Config.Seal returned a nil Store")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// reseal closes the Store and opens its storage again with k.
func (s *store) reseal(k *seal.Keyring) {
	s.t.Helper()
	s.Store = s.c.Seal(s.t, s.Store, k)
	if s.Store == nil {
		s.t.Fatal("Config.Seal returned a nil Store")
	}
}

// Keys of the sealing subtests: fixed, so that a failure reproduces.
var (
	keyA  = bytes.Repeat([]byte{0xa1}, seal.KeySize)
	keyA2 = bytes.Repeat([]byte{0xa2}, seal.KeySize) // another key under ID "A"
	keyB  = bytes.Repeat([]byte{0xb1}, seal.KeySize)
)

func keyring(current string, keys map[string][]byte) *seal.Keyring {
	return &seal.Keyring{Current: current, Keys: keys}
}

// Secrets of the record newSecret makes: each in one field that a sealed
// record keeps in its sealed part, and nowhere else.
const (
	secretCard     = "4111111111111111" // the body's card number
	secretHolder   = "Erika-Mustermann" // a header's value
	secretQuery    = "pan-7d1c9e"       // the URL's query
	secretLocation = "loc-5b2a0f"       // a 307's Location query
	secretTenant   = "tenant-3f8e21"    // Identity
	secretTag      = "c0ffee0ddba11c0ffee0ddba11c0ffee"
	secretType     = "application/vnd.secret-9a4c+json"
)

// newSecret returns a new pending record whose request holds the secrets
// above, named by the operation ID "op-"+id.
func newSecret(t *testing.T, id string) *journal.Record {
	t.Helper()
	rec := newRecord(t, id)
	rec.Body = []byte(`{"card":"` + secretCard + `","cvc":"737","reference":"` + id + `"}`)
	rec.BodySHA256 = journal.BodySum(rec.Body)
	rec.URL = "https://api.example.test/v1/payments?ref=" + secretQuery
	rec.Header = http.Header{"Content-Type": {secretType}, "X-Card-Holder": {secretHolder}}
	rec.Identity, rec.CredentialTag, rec.ContentType = secretTenant, secretTag, secretType
	return rec
}

// secrets returns the secrets rec's request holds, in every form a raw
// reading may show them: as they are, and hex-encoded (PostgreSQL prints a
// bytea in hex).
func secrets(rec *journal.Record) []string {
	var out []string
	for _, s := range []string{secretCard, secretHolder, secretQuery, secretLocation, secretTenant, secretTag, secretType, rec.BodySHA256} {
		out = append(out, s, hex.EncodeToString([]byte(s)))
	}
	return out
}

// keyID fails t unless got is sealed under want ("": in plaintext).
func keyID(t *testing.T, what string, got *journal.Record, want string) {
	t.Helper()
	if got.EncryptionKeyID != want {
		t.Fatalf("%s: %s: EncryptionKeyID = %q, want %q", what, journal.NameOf(got), got.EncryptionKeyID, want)
	}
}

// listed returns the record Pending lists under rec's Ref, or nil.
func listed(t *testing.T, s journal.Store, rec *journal.Record) *journal.Record {
	t.Helper()
	for _, r := range pending(t, s, 0) {
		if journal.RefOf(r).Seq == journal.RefOf(rec).Seq {
			return r
		}
	}
	return nil
}

// unopened fails t unless the Store reads rec with an error matching want
// (and not the other sealing error), naming key ID kid, from Get and
// Reload, and lists it Sealed: its readable fields, without its sealed
// part or its body.
func unopened(t *testing.T, s journal.Store, rec *journal.Record, want error, kid string) {
	t.Helper()
	other := journal.ErrDecrypt
	if want == journal.ErrDecrypt {
		other = journal.ErrUnknownEncryptionKey
	}
	for _, read := range []struct {
		name string
		fn   func() (*journal.Record, error)
	}{
		{"Get", func() (*journal.Record, error) { return s.Get(ctx, journal.NameOf(rec)) }},
		{"Reload", func() (*journal.Record, error) { return s.Reload(ctx, rec) }},
	} {
		got, err := read.fn()
		switch {
		case !errors.Is(err, want) || errors.Is(err, other):
			t.Fatalf("%s(%s) = %v, want an error matching %v only", read.name, journal.NameOf(rec), err, want)
		case !strings.Contains(err.Error(), `"`+kid+`"`):
			t.Fatalf("%s(%s) = %v, which does not name key ID %q", read.name, journal.NameOf(rec), err, kid)
		case got != nil && (got.Body != nil || got.Header != nil):
			t.Fatalf("%s(%s) returned %q and %v beside its error", read.name, journal.NameOf(rec), got.Body, got.Header)
		}
	}
	l := listed(t, s, rec)
	if l == nil {
		t.Fatalf("Pending does not list %s, sealed under a key the Store cannot use", journal.NameOf(rec))
	}
	plainURL, _ := seal.SplitURL(rec.URL)
	switch {
	case !l.Sealed:
		t.Fatalf("Pending lists %s without Sealed", journal.NameOf(rec))
	case l.Key != rec.Key || l.OperationID != rec.OperationID || l.Method != rec.Method || l.URL != plainURL ||
		l.State != rec.State || !l.Created.Equal(rec.Created) || l.EncryptionKeyID != kid:
		t.Fatalf("Pending lists %s as %+v: not what stays readable of it", journal.NameOf(rec), l)
	case seal.HoldsRequest(l) || l.Body != nil:
		t.Fatalf("Pending lists %s, which it cannot open, with request fields: %+v", journal.NameOf(rec), l)
	}
}

// sealedSecret creates a record holding newSecret's secrets in s, gives it
// a Location (a 307), and returns it as s holds it.
func sealedSecret(t *testing.T, s journal.Store, id string) *journal.Record {
	t.Helper()
	rec := create(t, s, newSecret(t, id))
	retry(t, rec, http.StatusTemporaryRedirect)
	rec.Location = "https://api.example.test/v2/payments?moved=" + secretLocation
	update(t, s, rec, journal.Durable)
	return rec
}

// A Store sealing under its Keyring's Current key reads back all it was
// given, through every read, before and after a reopen, and through a
// settle.
func testSealRoundTrip(t *testing.T, c *Config) {
	kr := keyring("A", map[string][]byte{"A": keyA})
	s := openSealed(t, c, kr)
	rec := sealedSecret(t, s, "1")
	keyID(t, "Create", rec, "A")
	keyID(t, "Get", mustGet(t, s, journal.NameOf(rec)), "A")
	checkEverywhere(t, s, rec)
	s.reseal(kr)
	checkEverywhere(t, s, rec)
	retry(t, rec, 503)
	update(t, s, rec, journal.Deferred)
	checkEverywhere(t, s, rec)
	apply(t, rec, journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, rec, journal.Deferred)
	checkEverywhere(t, s, rec)
	s.reseal(kr)
	checkEverywhere(t, s, rec)
	keyID(t, "Get after a settle", mustGet(t, s, journal.NameOf(rec)), "A")
}

// What the storage holds of a sealed record shows none of its request: not
// the body, a header, the URL's or the Location's query, the identity, the
// credential tag, the content type or the body's hash. The same record
// without a Keyring shows them, so that the check is known to see them.
func testSealNothingInClear(t *testing.T, c *Config) {
	needSeal(t, c)
	if c.Raw == nil {
		t.Skip("Config.Raw is nil: the storage's bytes are not checked")
	}
	s := openSealed(t, c, keyring("A", map[string][]byte{"A": keyA}))
	rec := sealedSecret(t, s, "1")
	other := sealedSecret(t, s, "2")
	retry(t, other, 503)
	update(t, s, other, journal.Deferred)
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	raw := c.Raw(t, s.Store)
	for _, secret := range secrets(rec) {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the storage holds %q in the clear, from a sealed record", secret)
		}
	}
	if !bytes.Contains(raw, []byte(rec.OperationID)) {
		t.Errorf("the storage does not show operation ID %q, which stays readable: Config.Raw misses the records", rec.OperationID)
	}

	plain := openSealed(t, c, nil)
	prec := sealedSecret(t, plain, "1")
	raw = c.Raw(t, plain.Store)
	for _, secret := range []string{secretCard, secretHolder, secretQuery, secretLocation, secretTenant} {
		if !bytes.Contains(raw, []byte(secret)) && !bytes.Contains(raw, []byte(hex.EncodeToString([]byte(secret)))) {
			t.Errorf("a plaintext Store's storage does not show %q: Config.Raw misses what is stored of %s", secret, journal.NameOf(prec))
		}
	}
}

// Rotated, a Store seals new records under the new Current key and reads
// old ones under the old key while the Keyring has it; a record keeps the
// key it was created under through its updates. With the old key gone,
// only its records stop opening; with it back, they open as written.
func testSealRotation(t *testing.T, c *Config) {
	onlyA := keyring("A", map[string][]byte{"A": keyA})
	rotated := keyring("B", map[string][]byte{"A": keyA, "B": keyB})
	onlyB := keyring("B", map[string][]byte{"B": keyB})
	s := openSealed(t, c, onlyA)
	old := sealedSecret(t, s, "old")

	s.reseal(rotated)
	young := sealedSecret(t, s, "young")
	keyID(t, "Create after the rotation", young, "B")
	checkEverywhere(t, s, old)
	checkEverywhere(t, s, young)
	keyID(t, "Get of a record from before the rotation", mustGet(t, s, journal.NameOf(old)), "A")
	retry(t, old, 503)
	update(t, s, old, journal.Durable)
	keyID(t, "Get of an old record updated after the rotation", mustGet(t, s, journal.NameOf(old)), "A")
	checkEverywhere(t, s, old)

	s.reseal(onlyB)
	checkEverywhere(t, s, young)
	unopened(t, s, old, journal.ErrUnknownEncryptionKey, "A")

	s.reseal(rotated)
	checkEverywhere(t, s, old)
	checkEverywhere(t, s, young)
}

// A record sealed under a key ID the Keyring lacks is not read, and is
// listed Sealed; the Store goes on with the others.
func testSealUnknownKeyID(t *testing.T, c *Config) {
	s := openSealed(t, c, keyring("A", map[string][]byte{"A": keyA}))
	rec := sealedSecret(t, s, "1")
	s.reseal(keyring("Z", map[string][]byte{"Z": keyB}))
	unopened(t, s, rec, journal.ErrUnknownEncryptionKey, "A")
	fresh := sealedSecret(t, s, "2")
	keyID(t, "Create", fresh, "Z")
	checkEverywhere(t, s, fresh)
	if n := count(t, s); n != 2 {
		t.Fatalf("PendingCount = %d, want 2: a record that cannot be opened is still pending", n)
	}
}

// A record read with another key under its key ID fails authentication:
// journal.ErrDecrypt, never bytes decrypted with the wrong key.
func testSealWrongKey(t *testing.T, c *Config) {
	s := openSealed(t, c, keyring("A", map[string][]byte{"A": keyA}))
	rec := sealedSecret(t, s, "1")
	s.reseal(keyring("A", map[string][]byte{"A": keyA2}))
	unopened(t, s, rec, journal.ErrDecrypt, "A")
}

// Opened without a Keyring, a Store that sealed reads none of its sealed
// records (journal.ErrUnknownEncryptionKey) and takes no new one: it would
// be written in plaintext. It may still end one as it stands (Resume
// expires one past KeyTTL): its sealed part and body are kept.
func testSealKeyringGone(t *testing.T, c *Config) {
	kr := keyring("A", map[string][]byte{"A": keyA})
	s := openSealed(t, c, kr)
	rec := sealedSecret(t, s, "1")
	s.reseal(nil)
	unopened(t, s, rec, journal.ErrUnknownEncryptionKey, "A")
	err := s.Create(ctx, newSecret(t, "2"))
	if !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Create without the Keyring in a Store that sealed = %v, want ErrInvalidOptions", err)
	}
	if n := count(t, s); n != 1 {
		t.Fatalf("PendingCount = %d after a refused Create, want 1", n)
	}
	if got := get(t, s, journal.Name{OperationID: "op-2"}); got != nil {
		t.Fatalf("a refused Create wrote %s", journal.NameOf(got))
	}

	l := listed(t, s, rec)
	apply(t, l, journal.EventExpire, journal.Change{Now: now()})
	update(t, s, l, journal.Durable)
	if n := count(t, s); n != 0 {
		t.Fatalf("PendingCount = %d after the sealed record expired, want 0", n)
	}
	s.reseal(kr)
	want := deepCopy(rec)
	want.State, want.Updated = journal.StateExpired, l.Updated
	same(t, "Get of a sealed record expired without its Keyring", mustGet(t, s, journal.NameOf(rec)), want, withBody)
}

// A record listed Sealed changes only while it is pending: once ended
// through a Store that could open it, an update of the listed copy is
// journal.ErrGone and changes nothing.
func testSealUnopenedUpdate(t *testing.T, c *Config) {
	kr := keyring("A", map[string][]byte{"A": keyA})
	s := openSealed(t, c, kr)
	rec := sealedSecret(t, s, "1")
	s.reseal(nil)
	l := listed(t, s, rec)
	s.reseal(kr)
	cur := mustGet(t, s, journal.NameOf(rec))
	apply(t, cur, journal.EventSettle, journal.Change{Now: now(), Status: 201})
	update(t, s, cur, journal.Durable)
	s.reseal(nil)
	apply(t, l, journal.EventExpire, journal.Change{Now: now()})
	if err := s.Update(ctx, l, journal.Durable); !errors.Is(err, journal.ErrGone) {
		t.Fatalf("Update of a record listed Sealed, settled since = %v, want ErrGone", err)
	}
	s.reseal(kr)
	same(t, "Get after a refused update", mustGet(t, s, journal.NameOf(rec)), cur, withoutBody)
}

// Turned on over a Store that holds plaintext records, sealing leaves
// them readable and in plaintext through their updates; new records are
// sealed; and the Store, opened without the Keyring again, takes no new
// record.
func testSealTurnedOnLater(t *testing.T, c *Config) {
	kr := keyring("A", map[string][]byte{"A": keyA})
	s := openSealed(t, c, nil)
	before := sealedSecret(t, s, "before")
	keyID(t, "Create without a Keyring", before, "")
	s.reseal(kr)
	checkEverywhere(t, s, before)
	after := sealedSecret(t, s, "after")
	keyID(t, "Create with a Keyring", after, "A")
	retry(t, before, 503)
	update(t, s, before, journal.Durable)
	keyID(t, "Get of a plaintext record updated with a Keyring", mustGet(t, s, journal.NameOf(before)), "")

	s.reseal(nil)
	checkEverywhere(t, s, before)
	unopened(t, s, after, journal.ErrUnknownEncryptionKey, "A")
	if err := s.Create(ctx, newSecret(t, "later")); !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Create without the Keyring in a Store once opened with one = %v, want ErrInvalidOptions", err)
	}
}
