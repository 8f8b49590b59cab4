// Tests of sealed rows (Options.Encryption) beside the conformance suite's:
// the rows as psql prints them hold no request bytes in the clear; rows
// altered in the database do not open; a namespace once sealed takes no
// plaintext row; and a schema of version 1 is upgraded in place.

package pgjournal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/journal"
	"github.com/idem-go/idem/journal/seal"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sealKeyring is the Keyring of these tests: one key, "k1".
func sealKeyring() *seal.Keyring {
	return &seal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": bytes.Repeat([]byte{0x5e}, seal.KeySize)}}
}

// psqlRows returns the namespace's rows of the operations table as psql
// prints `SELECT * FROM <schema>.operations`: every column in PostgreSQL's
// text form (the simple protocol's), a bytea in hex, a jsonb as its text;
// columns split by '|', one row a line.
func psqlRows(t testing.TB, pool *pgxpool.Pool, schema, ns string) []byte {
	t.Helper()
	rows, err := pool.Query(bg, `SELECT * FROM `+pgx.Identifier{schema}.Sanitize()+`.operations
		WHERE namespace = $1 ORDER BY seq`, pgx.QueryExecModeSimpleProtocol, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []byte
	for rows.Next() {
		for _, v := range rows.RawValues() {
			out = append(append(out, v...), '|')
		}
		out = append(out, '\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A card number and other marks, each in one field of the request that a
// sealed row keeps sealed.
const (
	markCard     = "4111111111111111"
	markHolder   = "Erika-Mustermann"
	markQuery    = "pan-31f5c2"
	markLocation = "loc-8c04aa"
	markTenant   = "tenant-77d0e3"
	markTag      = "feedfacecafebeeffeedfacecafebeef"
)

// markedRecord returns a new pending record for operation ID id whose
// request holds every mark.
func markedRecord(t *testing.T, id string) *journal.Record {
	t.Helper()
	rec := pendingRec(t, id)
	rec.Body = []byte(`{"amount":100,"card":{"number":"` + markCard + `","cvc":"123"},"reference":"` + id + `"}`)
	rec.BodySHA256 = journal.BodySum(rec.Body)
	rec.URL += "?pan=" + markQuery
	rec.Header = http.Header{"Content-Type": {"application/json"}, "X-Card-Holder": {markHolder}}
	rec.Identity, rec.CredentialTag, rec.ContentType = markTenant, markTag, "application/json"
	return rec
}

// marks returns rec's marks and body hash, each as it is and hex-encoded.
func marks(rec *journal.Record) []string {
	var out []string
	for _, m := range []string{markCard, markHolder, markQuery, markLocation, markTenant, markTag, rec.BodySHA256} {
		out = append(out, m, hex.EncodeToString([]byte(m)))
	}
	return out
}

// writeMarked writes, in j, operations holding every mark in each state a
// row can be in with a body or headers: pending, moved by a 307 (the
// Location's query is marked too), failed, and one enqueued through the
// Outbox; and a settled one. It returns the first.
func writeMarked(t *testing.T, j *Journal) *journal.Record {
	t.Helper()
	first := markedRecord(t, "pending")
	claimCreate(t, j, first)
	moved := markedRecord(t, "moved")
	claimCreate(t, j, moved)
	moved.Attempts++
	if _, err := journal.Apply(moved, journal.EventRetry, journal.Change{Now: time.Now(), Status: 307}); err != nil {
		t.Fatal(err)
	}
	moved.Location = "http://127.0.0.1:1/v2/payments?moved=" + markLocation
	if err := j.Update(bg, moved, journal.Durable); err != nil {
		t.Fatal(err)
	}
	for _, e := range []journal.Event{journal.EventFail, journal.EventSettle} {
		rec := markedRecord(t, e.String())
		claimCreate(t, j, rec)
		if _, err := journal.Apply(rec, e, journal.Change{Now: time.Now(), Status: 201, Error: "idem: invalid URL"}); err != nil {
			t.Fatal(err)
		}
		if err := j.Update(bg, rec, journal.Durable); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := j.pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := NewOutbox(j, markedPreparer{t}).EnqueueTx(bg, tx, &http.Request{}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	return first
}

// markedPreparer prepares markedRecord("outbox") whatever the request.
type markedPreparer struct{ t *testing.T }

func (p markedPreparer) Prepare(*http.Request) (*journal.Record, error) {
	return markedRecord(p.t, "outbox"), nil
}

// The rows of a sealed namespace, read as psql reads them, hold no body
// byte and no sealed field in the clear: not through the simple protocol
// with bytea printed in hex or in PostgreSQL's escape form (printable
// bytes as they are), nor through psql itself, nor in the bytea columns'
// raw bytes. The same operations written without a Keyring show the marks,
// so the reading is known to see them.
func TestSealedRowsHoldNothingInClear(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	sealedOpts := Options{Schema: schema, Namespace: namespace(t), Encryption: sealKeyring()}
	plainOpts := Options{Schema: schema, Namespace: namespace(t)}
	rec := writeMarked(t, openTest(t, pool, sealedOpts))
	writeMarked(t, openTest(t, pool, plainOpts))

	readings := func(t *testing.T, ns string) map[string][]byte {
		got := map[string][]byte{"simple protocol, bytea_output hex": psqlRows(t, pool, schema, ns)}
		conn, err := pool.Acquire(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(bg, `SET bytea_output = 'escape'`); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(bg, `RESET bytea_output`)
		rows, err := conn.Query(bg, `SELECT o::text FROM `+pgx.Identifier{schema}.Sanitize()+`.operations o WHERE namespace = $1`,
			pgx.QueryExecModeSimpleProtocol, ns)
		if err != nil {
			t.Fatal(err)
		}
		text, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		got["simple protocol, bytea_output escape"] = []byte(strings.Join(text, "\n"))
		rows, err = pool.Query(bg, `SELECT coalesce(body, ''), coalesce(sealed, '') FROM `+pgx.Identifier{schema}.Sanitize()+`.operations
			WHERE namespace = $1`, ns)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]byte, error) {
			var body, box []byte
			err := r.Scan(&body, &box)
			return append(body, box...), err
		})
		if err != nil {
			t.Fatal(err)
		}
		got["bytea columns, raw"] = bytes.Join(cols, []byte("\n"))
		if out, err := psqlOutput(t, schema, ns); err == nil {
			got["psql"] = out
		}
		return got
	}

	sealedReadings := readings(t, sealedOpts.Namespace)
	if _, ok := sealedReadings["psql"]; !ok && os.Getenv("CI") != "" {
		t.Error("psql did not run (CI is set: it must)")
	}
	for how, raw := range sealedReadings {
		if !bytes.Contains(raw, []byte("key-pending")) && how != "bytea columns, raw" {
			t.Errorf("%s: the rows do not show the idempotency key, which stays readable: %.200q", how, raw)
		}
		for _, m := range marks(rec) {
			if bytes.Contains(raw, []byte(m)) {
				t.Errorf("%s: a sealed namespace's rows hold %q in the clear", how, m)
			}
		}
	}
	for how, raw := range readings(t, plainOpts.Namespace) {
		for _, m := range []string{markCard, markHolder, markQuery, markLocation, markTenant, markTag} {
			if !bytes.Contains(raw, []byte(m)) && !bytes.Contains(raw, []byte(hex.EncodeToString([]byte(m)))) &&
				!(how == "bytea columns, raw" && m != markCard) { // the bytea columns hold the body alone
				t.Errorf("%s: a plaintext namespace's rows do not show %q: the reading misses them", how, m)
			}
		}
	}
}

// psqlOutput runs psql itself on the test database, if it is installed,
// and returns what `SELECT * FROM <schema>.operations` prints for ns.
func psqlOutput(t *testing.T, schema, ns string) ([]byte, error) {
	t.Helper()
	path, err := exec.LookPath("psql")
	if err != nil {
		t.Logf("psql is not installed: %v", err)
		return nil, err
	}
	url := pgtest.URL()
	q := `SELECT * FROM ` + pgx.Identifier{schema}.Sanitize() + `.operations WHERE namespace = '` + strings.ReplaceAll(ns, "'", "''") + `'`
	out, err := exec.Command(path, "-X", "-A", "-c", q, url).CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v: %s", err, out)
	}
	if !bytes.Contains(out, []byte("(5 rows)")) {
		t.Fatalf("psql printed %q, want the namespace's 5 rows", out)
	}
	return out, nil
}

// tamper runs an UPDATE on j's namespace's operations table, the row of
// operation ID op as $2.
func tamper(t *testing.T, j *Journal, op, set string, args ...any) {
	t.Helper()
	tag, err := j.pool.Exec(bg, j.sql(`UPDATE {s}.operations SET `+set+` WHERE namespace = $1 AND operation_id = $2`),
		append([]any{j.opts.Namespace, op}, args...)...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tamper %s: %v, %d rows", set, err, tag.RowsAffected())
	}
}

// A sealed row altered in the database does not open: Get and Reload fail
// with journal.ErrDecrypt, Pending lists it Sealed when its sealed part is
// what does not open, and nothing of it is returned as if it were what
// idem wrote. A row whose request stands in the clear beside a sealed part,
// or a sealed part without a key ID, is not one pgjournal writes: corrupt.
func TestSealedRowTampered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, j *Journal)
		want   error
		listed bool // Pending lists it Sealed (else it lists it opened, its body unread)
	}{
		{"body byte flipped", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `body = set_byte(body, length(body) - 1, get_byte(body, length(body) - 1) # 1)`)
		}, journal.ErrDecrypt, false},
		{"bodies swapped", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `body = (SELECT body FROM {s}.operations WHERE namespace = $1 AND operation_id = 't2')`)
		}, journal.ErrDecrypt, false},
		{"sealed part flipped", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `sealed = set_byte(sealed, 20, get_byte(sealed, 20) # 1)`)
		}, journal.ErrDecrypt, true},
		{"sealed parts swapped", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `sealed = (SELECT sealed FROM {s}.operations WHERE namespace = $1 AND operation_id = 't2')`)
		}, journal.ErrDecrypt, true},
		{"path retargeted", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `record = jsonb_set(record, '{url}', to_jsonb(replace(record->>'url', '/payments', '/refunds')))`)
		}, journal.ErrDecrypt, true},
		{"key changed", func(t *testing.T, j *Journal) { tamper(t, j, "t1", `key = 'another-key'`) }, journal.ErrDecrypt, true},
		{"header injected in the clear", func(t *testing.T, j *Journal) {
			tamper(t, j, "t1", `record = jsonb_set(record, '{header}', '{"X-Injected": ["1"]}')`)
		}, journal.ErrCorrupt, false},
		{"sealed part dropped", func(t *testing.T, j *Journal) { tamper(t, j, "t1", `sealed = NULL`) }, journal.ErrCorrupt, false},
		{"key ID dropped", func(t *testing.T, j *Journal) { tamper(t, j, "t1", `record = record - 'kid'`) }, journal.ErrCorrupt, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testPool(t)
			j := openTest(t, pool, Options{Schema: testSchema(t, pool), Namespace: namespace(t), Encryption: sealKeyring()})
			rec := markedRecord(t, "t1")
			claimCreate(t, j, rec)
			claimCreate(t, j, markedRecord(t, "t2"))
			tc.change(t, j)

			got, err := j.Get(bg, journal.NameOf(rec))
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Get = %v, %v; want nil and an error matching %v", got, err, tc.want)
			}
			if got, err := j.Reload(bg, rec); !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Reload = %v, %v; want nil and an error matching %v", got, err, tc.want)
			}
			var listed *journal.Record
			for r, err := range j.Pending(bg, 0) {
				if err != nil {
					if tc.want == journal.ErrCorrupt && errors.Is(err, journal.ErrCorrupt) {
						return // a corrupt row ends the listing, as a damaged bbolt record does
					}
					t.Fatal(err)
				}
				if r.OperationID == "t1" {
					listed = r
				}
			}
			switch {
			case listed == nil:
				t.Fatal("Pending does not list the altered row")
			case listed.Sealed != tc.listed:
				t.Fatalf("Pending lists it with Sealed %v, want %v", listed.Sealed, tc.listed)
			case listed.Sealed && (listed.Header != nil || listed.BodySHA256 != "" || listed.Body != nil):
				t.Fatalf("Pending lists it Sealed with request fields: %+v", listed)
			}
			if err := j.Flush(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A namespace opened once with Options.Encryption takes no plaintext row:
// not from a Journal opened without it afterwards, and not from one opened
// before, still running (the INSERT checks the namespace's mark), through
// Create or the Outbox. Nothing is written.
func TestSealedNamespaceRefusesPlaintextRows(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	before := openTest(t, pool, opts)
	claimCreate(t, before, pendingRec(t, "plain-before"))
	createBefore, enqueueBefore := openTest(t, pool, opts), openTest(t, pool, opts)
	sealedOpts := opts
	sealedOpts.Encryption = sealKeyring()
	sealed := openTest(t, pool, sealedOpts)
	claimCreate(t, sealed, markedRecord(t, "sealed"))
	after := openTest(t, pool, opts)

	create := func(name string, j *Journal) {
		if err := j.Create(bg, pendingRec(t, "plain-"+name)); !errors.Is(err, journal.ErrInvalidOptions) {
			t.Errorf("Create through a Journal %s = %v, want ErrInvalidOptions", name, err)
		}
	}
	enqueue := func(name string, j *Journal) {
		tx, err := pool.Begin(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(bg)
		if _, err := NewOutbox(j, markedPreparer{t}).EnqueueTx(bg, tx, &http.Request{}); !errors.Is(err, journal.ErrInvalidOptions) {
			t.Errorf("EnqueueTx through a Journal %s = %v, want ErrInvalidOptions", name, err)
		}
		if err := tx.Commit(bg); err != nil {
			t.Errorf("the caller's transaction after a refused EnqueueTx: %v", err)
		}
	}
	create("opened before the mark", createBefore)
	enqueue("opened before the mark", enqueueBefore)
	create("opened after the mark", after)
	enqueue("opened after the mark", after)
	create("whose Create was refused", createBefore)
	enqueue("whose EnqueueTx was refused", enqueueBefore)

	if got, err := before.Get(bg, journal.Name{OperationID: "plain-before"}); err != nil || got == nil || got.EncryptionKeyID != "" {
		t.Fatalf("Get of the plaintext row from before = %+v, %v", got, err)
	}
	var n int
	if err := pool.QueryRow(bg, before.sql(`SELECT count(*) FROM {s}.operations WHERE namespace = $1`), opts.Namespace).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows, %v; want 2: the refused ones were written", n, err)
	}
}

// An invalid Keyring fails Open with journal.ErrInvalidOptions, naming
// Encryption, before anything is created.
func TestOpenRefusesInvalidKeyring(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t),
		Encryption: &seal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": {1, 2, 3}}}}
	if _, err := Open(bg, pool, &opts); !errors.Is(err, journal.ErrInvalidOptions) || !strings.Contains(err.Error(), "Encryption") {
		t.Fatalf("Open = %v, want ErrInvalidOptions naming Encryption", err)
	}
	if v, err := SchemaVersion(bg, pool, &Options{Schema: opts.Schema}); err != nil || v != 0 {
		t.Fatalf("SchemaVersion = %d, %v; want 0: nothing created", v, err)
	}
}

// A schema at version 1, with a row written then, is read as it is
// (Records), and upgraded in place by Open: the old row reads the same, and
// rows written from then on are sealed.
func TestMigrateFromVersion1(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	schema := pgx.Identifier{opts.Schema}.Sanitize()
	for _, q := range []string{`CREATE SCHEMA ` + schema,
		`CREATE TABLE ` + schema + `.version (version int NOT NULL)`,
		strings.ReplaceAll(migrations[0], "{{schema}}", schema),
		`INSERT INTO ` + schema + `.version VALUES (1)`,
	} {
		if _, err := pool.Exec(bg, q); err != nil {
			t.Fatal(err)
		}
	}
	old := pendingRec(t, "from-version-1")
	data, _, err := encode(nil, old)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(bg, `INSERT INTO `+schema+`.operations (namespace, key, caller_key, operation_id, state, record, body, updated)
		VALUES ($1, $2, false, $3, 1, $4::text::jsonb, $5, $6)`, opts.Namespace, old.Key, old.OperationID, string(data), old.Body, old.Updated)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := SchemaVersion(bg, pool, &opts); err != nil || v != 1 {
		t.Fatalf("SchemaVersion = %d, %v; want 1", v, err)
	}
	for rec, err := range Records(bg, pool, &opts, true) {
		if err != nil || rec.OperationID != old.OperationID || !bytes.Equal(rec.Body, old.Body) {
			t.Fatalf("Records of a version-1 schema: %+v, %v", rec, err)
		}
	}

	opts.Encryption = sealKeyring()
	j := openTest(t, pool, opts)
	if v, err := SchemaVersion(bg, pool, &opts); err != nil || v != schemaVersion {
		t.Fatalf("SchemaVersion after Open = %d, %v; want %d", v, err, schemaVersion)
	}
	got, err := j.Get(bg, journal.NameOf(old))
	if err != nil || got == nil || !bytes.Equal(got.Body, old.Body) || got.EncryptionKeyID != "" {
		t.Fatalf("Get of the version-1 row = %+v, %v", got, err)
	}
	rec := markedRecord(t, "after")
	claimCreate(t, j, rec)
	if rec.EncryptionKeyID != "k1" {
		t.Fatalf("a row written after the upgrade has key ID %q, want k1", rec.EncryptionKeyID)
	}
	if raw := psqlRows(t, pool, opts.Schema, opts.Namespace); bytes.Contains(raw, []byte(hex.EncodeToString([]byte(markCard)))) {
		t.Fatal("a row written after the upgrade holds the card number in the clear")
	}
}
