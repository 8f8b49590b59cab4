//go:build linux

// chaos_netns_test.go runs "idem chaos -netns" cut down, on a fleet and on two servers
// sharing Redis, and checks that it refuses to run where it cannot.

package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/netlab"
	"github.com/stretchr/testify/require"
)

// needNetns skips t, in one line, where network namespaces cannot be made, or fails it
// when CI is set.
func needNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs child processes in network namespaces for several seconds")
	}
	switch why := netlab.Unavailable(); {
	case why == "":
	case os.Getenv("CI") != "":
		t.Fatalf("chaos -netns: %s (CI is set, so this fails instead of skipping)", why)
	default:
		t.Skipf("chaos -netns: %s", why)
	}
}

// requireNetFaults checks what every -netns run must show: one round of faults (two
// partitions both ways, two one way, one slow link or loss) applied and healed, each with
// what it did, and no operation pending after the final heal.
func requireNetFaults(t *testing.T, out string, before map[string]bool) {
	t.Helper()
	require.Regexp(t, `5 of 5 faults applied`, out)
	for _, healed := range []string{`2 one-way partition\b`, `2 partition both ways\b`, `1 (packet loss|slow link)`} {
		require.Regexp(t, `(?m)^  healed: .*`+healed, out)
	}
	require.Regexp(t, `(?m)^  - at .*, partition \S+ <-> \S+ for .*: .*\d+ payments answered, the slowest after`, out)
	require.Regexp(t, `(?m)^  - at .*, one-way partition: \S+'s packets to \S+ dropped for`, out)
	require.Regexp(t, `(?m)^  - at .*, (30% packet loss|slow link)`, out)
	require.NotContains(t, out, "FAILED")
	require.Empty(t, leftBehind(t, before), "namespaces the run left behind")
}

// namespaces lists the network namespaces ip(8) names now.
func namespaces(t *testing.T) map[string]bool {
	t.Helper()
	entries, _ := os.ReadDir(netlab.NSDir)
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// leftBehind returns the namespaces named now but not in before whose process has ended:
// what a chaos run left, since the run's namespaces carry its pid.
func leftBehind(t *testing.T, before map[string]bool) []string {
	t.Helper()
	var left []string
	for name := range namespaces(t) {
		rest, ok := strings.CutPrefix(name, netlab.NSPrefix)
		pid, err := strconv.Atoi(strings.Split(rest, "-")[0])
		if before[name] || !ok || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			left = append(left, name)
		}
	}
	return left
}

// TestChaosNetnsFleet is "idem chaos -netns -workers 3 -journal postgres://…" cut down:
// the workers and the server each in a namespace, PostgreSQL through link proxies, one
// round of the nemesis's faults, SIGKILLs.
func TestChaosNetnsFleet(t *testing.T) {
	needNetns(t)
	bin := idemBinary(t)
	journalURL, _ := testPostgres(t)
	before := namespaces(t)
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-netns", "-journal", journalURL, "-workers", "3", "-n", "800",
		"-concurrency", "8", "-kills", "5", "-kill-within", "800ms", "-lease", "1s", "-seed", "7", "-store-faults", "1")
	require.NoError(t, err, out)
	require.Regexp(t, `made exactly once\s+800\b`, out)
	require.Regexp(t, `made twice or more\s+0\b`, out)
	require.Regexp(t, `SIGKILLs, then restarted\s+5\b`, out)
	require.Regexp(t, `pending in the journal\s+0\s+after the final heal`, out)
	requireNetFaults(t, out, before)
	t.Log(out)
}

// TestChaosNetnsServersRedis is "idem chaos -netns -servers 2 -server-store redis://…" cut
// down: the worker, the proxy, both servers and the store each in a namespace.
func TestChaosNetnsServersRedis(t *testing.T) {
	needNetns(t)
	bin := idemBinary(t)
	before := namespaces(t)
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-netns", "-servers", "2", "-server-store", "redis://"+testRedis(t)+"/0",
		"-n", "800", "-concurrency", "16", "-kills", "4", "-kill-within", "800ms", "-seed", "11", "-store-faults", "1")
	require.NoError(t, err, out)
	require.Contains(t, out, "800/800 payments made exactly once")
	require.Regexp(t, `keys left in progress\s+0\b`, out)
	requireNetFaults(t, out, before)
	t.Log(out)
}

// TestChaosNetnsRefused: -netns without parts to put in namespaces is a usage error, and
// without the capabilities to make them, a clear one.
func TestChaosNetnsRefused(t *testing.T) {
	bin := idemBinary(t)
	out, err := runIdem(t, bin, time.Minute, "chaos", "-netns")
	require.Error(t, err)
	require.Contains(t, out, "-netns needs -workers N with a postgres:// -journal, or -servers 2 or more")

	if _, err := exec.LookPath("setpriv"); err != nil || os.Geteuid() != 0 {
		t.Skip("dropping capabilities needs root and setpriv(1)")
	}
	// root without a capability left: what an unprivileged user meets.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "setpriv", "--bounding-set=-all", "--inh-caps=-all", bin,
		"chaos", "-netns", "-servers", "2", "-server-store", "redis://127.0.0.1:6379/0").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(b), "-netns: cannot make network namespaces here: netlab: needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
}
