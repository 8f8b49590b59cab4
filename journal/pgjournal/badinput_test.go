// Bad input to Open and the Journal: a nil pool, odd namespaces, strings
// that PostgreSQL's jsonb refuses.

package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/journal"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A nil pool is invalid options, not a panic on its first use.
func TestOpenNilPool(t *testing.T) {
	if j, err := Open(bg, nil, nil); j != nil || !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Open(nil pool) = %v, %v; want ErrInvalidOptions", j, err)
	}
	if err := Migrate(bg, nil, nil); !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Migrate(nil pool) = %v; want ErrInvalidOptions", err)
	}
}

// A nil context is invalid options too, refused before the pool is used (this one
// connects nowhere: pgxpool dials on first use).
func TestOpenNilContext(t *testing.T) {
	pool, err := pgxpool.New(bg, "postgres://postgres@127.0.0.1:1/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var noCtx context.Context
	if j, err := Open(noCtx, pool, nil); j != nil || !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Open(nil context) = %v, %v; want ErrInvalidOptions", j, err)
	}
	if err := Migrate(noCtx, pool, nil); !errors.Is(err, journal.ErrInvalidOptions) {
		t.Fatalf("Migrate(nil context) = %v; want ErrInvalidOptions", err)
	}
}

// A retry or a failure whose error text holds a NUL (a base RoundTripper's
// error may quote a server's bytes) is written: jsonb refuses \u0000, and
// without the replacement the write failed every time, losing the attempt
// count and the backoff of a pending operation, and leaving a failed one
// pending.
func TestErrorTextWithNUL(t *testing.T) {
	a, _, _ := pair(t)
	for _, ev := range []journal.Event{journal.EventRetry, journal.EventFail} {
		rec := pendingRec(t, "nul-"+ev.String())
		claimCreate(t, a, rec)
		if _, err := journal.Apply(rec, ev, journal.Change{Now: time.Now(), Status: 502,
			Next: time.Now().Add(time.Minute), Error: "proxy: bad header \"a\x00b\""}); err != nil {
			t.Fatal(err)
		}
		if err := a.Update(bg, rec, journal.Durable); err != nil {
			t.Fatalf("%v with a NUL in its error: %v", ev, err)
		}
		got, err := a.Reload(bg, rec)
		if err != nil || got == nil {
			t.Fatalf("Reload: %v, %v", got, err)
		}
		if got.State != rec.State || got.Attempts != rec.Attempts || got.LastError != "proxy: bad header \"a\uFFFDb\"" {
			t.Fatalf("after %v: state %v, attempts %d, error %q; want %v, %d, the NUL replaced",
				ev, got.State, got.Attempts, got.LastError, rec.State, rec.Attempts)
		}
		a.Release(journal.NameOf(rec))
	}
}

// A namespace PostgreSQL cannot store or index is invalid options, not a
// database error at Open or at the first Create; quotes, unicode and SQL
// in one are only text.
func TestOddNamespaces(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	for _, ns := range []string{"a\x00b", "\xff\xfe", strings.Repeat("n", 256)} {
		if j, err := Open(bg, pool, &Options{Schema: schema, Namespace: ns}); !errors.Is(err, journal.ErrInvalidOptions) {
			t.Errorf("Open with Namespace %.20q: %v, %v; want ErrInvalidOptions", ns, j, err)
			if j != nil {
				j.Close()
			}
		}
	}
	for i, ns := range []string{`a"b'c\`, "ünï😀", "x'; DROP TABLE operations; --", strings.Repeat("é", 127)} {
		j := openTest(t, pool, Options{Schema: schema, Namespace: ns})
		rec := pendingRec(t, fmt.Sprintf("op-%d", i))
		claimCreate(t, j, rec)
		j.Release(journal.NameOf(rec))
		if got, err := j.Get(bg, journal.NameOf(rec)); err != nil || got == nil || got.Key != rec.Key {
			t.Errorf("Namespace %.20q: Get = %v, %v; want the record written", ns, got, err)
		}
	}
}
