package main

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestChaosShort is "idem chaos" cut down for CI: a few hundred payments
// through the mixed fault plan and a few SIGKILLs.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 2*time.Minute, "chaos", "-n", "300", "-concurrency", "32", "-kills", "5",
		"-kill-within", "800ms", "-seed", "7")
	require.NoError(t, err, out)
	require.Regexp(t, `payments to make\s+300\b`, out)
	require.Regexp(t, `SIGKILLs of the sending process\s+5\b`, out)
	require.Regexp(t, `charged, then the response was lost\s+[1-9]`, out)
	require.Regexp(t, `made twice or more \(charged again\)\s+0\b`, out)
	require.Regexp(t, `never made\s+0\b`, out)
	require.Contains(t, out, "300/300 payments made exactly once")
	t.Log(out)
}

// TestChaosFleetShort is "idem chaos -journal postgres://… -workers 3" cut
// down: three workers share a PostgreSQL journal, are SIGKILLed at random,
// one for good, and the survivors adopt what the dead left, with its keys.
// CI runs the full one, with a database restart (.ci/run).
func TestChaosFleetShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	journalURL, _ := testPostgres(t)
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-journal", journalURL, "-workers", "3", "-n", "300",
		"-concurrency", "8", "-kills", "5", "-kill-within", "800ms", "-lease", "1s", "-seed", "7")
	require.NoError(t, err, out)
	require.Regexp(t, `made exactly once\s+300\b`, out)
	require.Regexp(t, `made twice or more\s+0\b`, out)
	require.Regexp(t, `never made\s+0\b`, out)
	require.Regexp(t, `SIGKILLs, then restarted\s+5\b`, out)
	require.Regexp(t, `SIGKILLed for good\s+1\s+worker 3`, out)
	require.Regexp(t, `adopted from dead processes\s+[1-9]\d*\s`, out, "a killed worker had payments in flight")
	require.Contains(t, out, "300/300 payments made exactly once by 3 workers")
	require.NotContains(t, out, "s3cret", "a password never shows")

	// The same namespace again is refused: its operations would hide this
	// run's payments.
	out, err = runIdem(t, bin, time.Minute, "chaos", "-journal", journalURL, "-workers", "3")
	require.Error(t, err)
	require.Contains(t, out, "already holds 300 operations")
	out, err = runIdem(t, bin, time.Minute, "chaos", "-workers", "3")
	require.Error(t, err)
	require.Contains(t, out, "need a postgres:// -journal")
}

// TestChaosTwoServersOnePostgres is "idem chaos -servers 2 -server-store postgres://…" cut
// down: two fake servers share one PostgreSQL idempotency store behind a round-robin
// proxy, so a payment's retries and resumes reach either; each is made exactly once.
func TestChaosTwoServersOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	journalURL, _ := testPostgres(t)
	u, err := url.Parse(journalURL)
	require.NoError(t, err)
	q := u.Query()
	q.Del("namespace") // a journal's, not the store's
	u.RawQuery = q.Encode()
	storeURL := u.String()
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-n", "300", "-concurrency", "16", "-kills", "4",
		"-kill-within", "800ms", "-seed", "11", "-servers", "2", "-server-store", storeURL, "-store-faults", "0")
	require.NoError(t, err, out)
	require.Contains(t, out, "a round-robin proxy to 2 servers sharing one idempotency store")
	require.Regexp(t, `by server \(round robin\)\s+[1-9]\d* / [1-9]\d*`, out, "both servers took requests")
	require.Regexp(t, `made twice or more \(charged again\)\s+0\b`, out)
	require.Regexp(t, `never made\s+0\b`, out)
	require.Contains(t, out, "300/300 payments made exactly once")
	require.NotContains(t, out, "s3cret", "a password never shows")
}

// TestChaosTwoServersOneRedis is the same on one Redis (IDEM_REDIS_ADDR, by default the
// local one): the run's records go under a prefix of its own, deleted at the end.
func TestChaosTwoServersOneRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	addr := testRedis(t)
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-n", "300", "-concurrency", "16", "-kills", "4",
		"-kill-within", "800ms", "-seed", "12", "-servers", "2", "-server-store", "redis://"+addr+"/0", "-store-faults", "0")
	require.NoError(t, err, out)
	require.Regexp(t, `by server \(round robin\)\s+[1-9]\d* / [1-9]\d*`, out, "both servers took requests")
	require.Regexp(t, `made twice or more \(charged again\)\s+0\b`, out)
	require.Contains(t, out, "300/300 payments made exactly once")
}

// chaosWithStoreFaults is "idem chaos -servers 2 -server-store storeURL" cut down, with
// one fault of each kind on the servers' links to the store.
func chaosWithStoreFaults(t *testing.T, storeURL, kind string) {
	t.Helper()
	bin := idemBinary(t)
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-n", "600", "-concurrency", "16", "-kills", "4",
		"-kill-within", "800ms", "-seed", "13", "-servers", "2", "-server-store", storeURL, "-store-faults", "1",
		"-timeout", "150s")
	t.Log(out)
	require.Contains(t, out, "sharing one idempotency store in "+kind+", each through a link of its own, 3 faults to come")
	require.Contains(t, out, "3 of 3 faults applied, one link at a time", out)
	for _, what := range []string{
		`reset after write on server [12]'s link for 1s: `,
		`replies held on server [12]'s link for 2.5s: `,
		`partition on server [12]'s link for 3s: `,
		`answered 503, store unavailable\s+\d+`,
		`store calls with an unknown outcome\s+\d+\s+resolved: `,
		`keys left in progress\s+\d+\s+in the store`,
	} {
		require.Regexp(t, what, out)
	}
	require.NoError(t, err, out)
	require.Regexp(t, `made twice or more \(charged again\)\s+0\b`, out)
	require.Regexp(t, `never made\s+0\b`, out)
	require.Regexp(t, `keys left in progress\s+0\b`, out)
	require.Contains(t, out, "600/600 payments made exactly once")
}

// TestChaosStoreLinkFaultsRedis: two servers, each with its own Redis client through its
// own faulty link: a reset after write, replies held, a partition longer than the lease.
func TestChaosStoreLinkFaultsRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	chaosWithStoreFaults(t, "redis://"+testRedis(t)+"/0", "Redis")
}

// TestChaosStoreLinkFaultsPostgres: the same on PostgreSQL, each server with a pgx pool of
// its own.
func TestChaosStoreLinkFaultsPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	journalURL, _ := testPostgres(t)
	u, err := url.Parse(journalURL)
	require.NoError(t, err)
	q := u.Query()
	q.Del("namespace")
	u.RawQuery = q.Encode()
	chaosWithStoreFaults(t, u.String(), "PostgreSQL")
}

// -store-faults needs a store with a link to fault.
func TestChaosStoreFaultsNeedAStore(t *testing.T) {
	out, err := runIdem(t, idemBinary(t), time.Minute, "chaos", "-servers", "2", "-store-faults", "1")
	require.Error(t, err)
	require.Contains(t, out, "-store-faults needs a redis:// or postgres:// -server-store")
}
