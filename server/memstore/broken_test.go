// broken_test.go checks the checker: the conformance suite, run against memstores broken
// in one rule each (in a child test process), must fail the subtests of that rule.

package memstore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/servertest"
)

// broken is a memstore with one rule broken, named by its kind.
type broken struct {
	*memstore.Store
	kind string
	seen map[string]int // calls per record, for the kinds that break a repeat
}

func (b broken) Claim(ctx context.Context, sc server.Scope, token, fp string, lease, ttl time.Duration) (server.Claim, error) {
	if b.kind == "claim-repeat-unrecognised" {
		token += "-" + server.NewToken() // every call a new token: a repeat finds a stranger's record
	}
	cl, err := b.Store.Claim(ctx, sc, token, fp, lease, ttl)
	if b.kind == "claim-overwrites" && err == nil && !cl.Claimed {
		return server.Claim{Claimed: true, Token: token}, nil
	}
	return cl, err
}

func (b broken) Complete(ctx context.Context, sc server.Scope, token string, resp *server.Response, ttl time.Duration) error {
	err := b.Store.Complete(ctx, sc, token, resp, ttl)
	switch {
	case b.kind == "complete-unfenced" && errors.Is(err, server.ErrLeaseLost):
		return nil
	case b.kind == "complete-repeat-refused" && err == nil && b.done(sc):
		return server.ErrLeaseLost // refuses its own repeat, as a Store minting no memory of it would
	}
	return err
}

// done reports whether sc's record was done before the call that asks (a completion just
// made counts on its second call only).
func (b broken) done(sc server.Scope) bool {
	n := b.seen[sc.ID()] + 1
	b.seen[sc.ID()] = n
	return n > 1
}

func (b broken) Release(ctx context.Context, sc server.Scope, token string) error {
	err := b.Store.Release(ctx, sc, token)
	if b.kind == "release-absent-refused" && err == nil && b.done(sc) {
		return server.ErrLeaseLost
	}
	return err
}

func (b broken) TakeOver(ctx context.Context, sc server.Scope, stale, token string, lease time.Duration) error {
	err := b.Store.TakeOver(ctx, sc, stale, token, lease)
	if b.kind == "takeover-live" && errors.Is(err, server.ErrLeaseLost) {
		return nil
	}
	return err
}

// TestBrokenStoreChild runs the suite on the broken store IDEM_BROKEN_STORE names; it is
// run only as TestSuiteCatchesBrokenStores's child.
func TestBrokenStoreChild(t *testing.T) {
	kind := os.Getenv("IDEM_BROKEN_STORE")
	if kind == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	servertest.Run(t, servertest.Config{
		Open:      func(testing.TB) server.Store { return &broken{memstore.New(nil), kind, map[string]int{}} },
		RealLease: 50 * time.Millisecond,
	})
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for kind, want := range map[string][]string{
		"claim-overwrites":  {"ClaimAtomic", "ClaimFindsLive", "ClaimKeepsFingerprint"},
		"complete-unfenced": {"WrongTokenFenced", "DoneRecordFenced", "ReleaseFreesScope"},
		"takeover-live":     {"TakeOverLiveLeaseRefused", "WrongTokenFenced"},

		"claim-repeat-unrecognised": {"ClaimRepeated"},
		"complete-repeat-refused":   {"CompleteRepeated", "DoneRecordFenced"},
		"release-absent-refused":    {"ReleaseRepeated"},
	} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStoreChild$", "-test.v")
			cmd.Env = append(os.Environ(), "IDEM_BROKEN_STORE="+kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with %s:\n%s", kind, out)
			}
			for _, name := range want {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStoreChild/"+name+" ") {
					t.Errorf("subtest %s did not fail for %s", name, kind)
				}
			}
		})
	}
}
