// cluster_test.go runs the conformance suite on a Redis Cluster: three throwaway
// redis-server processes of the test's own (never the shared Redis), on free loopback
// ports, their slots split three ways, reached through a go-redis ClusterClient. It
// shows the key layout cluster-safe: every script touches one slot, and records spread
// over the masters.

package redisstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/redisstore"
	"github.com/idem-go/idem/server/servertest"
)

const clusterNodes = 3

// One throwaway cluster, checked twice: records spread over the masters, and the
// conformance suite passes through a ClusterClient.
func TestCluster(t *testing.T) {
	cc := startCluster(t)
	t.Run("Spread", func(t *testing.T) { testClusterSpread(t, cc) })
	t.Run("Conformance", func(t *testing.T) {
		servertest.Run(t, servertest.Config{
			Open: func(t testing.TB) server.Store {
				s, err := redisstore.Open(context.Background(), cc, &redisstore.Options{Prefix: "idemtest:" + rand.Text() + ":"})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			RealLease: 500 * time.Millisecond,
		})
	})
}

// Records of different Scopes land on different masters: the hash tag is the Scope's,
// not the prefix's. It runs first, on an empty cluster.
func testClusterSpread(t *testing.T, cc *redis.ClusterClient) {
	s, err := redisstore.Open(context.Background(), cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 64 {
		sc := server.Scope{Identity: "id", Method: "POST", Path: "/p", Key: fmt.Sprint("k-", i)}
		if cl, err := s.Claim(ctx, sc, server.NewToken(), "fp", time.Minute, time.Hour); err != nil || !cl.Claimed {
			t.Fatalf("Claim %d = %+v, %v", i, cl, err)
		}
	}
	var mu sync.Mutex
	var sizes []int64
	err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, n)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	used, total := 0, int64(0)
	for _, n := range sizes {
		total += n
		if n > 0 {
			used++
		}
	}
	if total != 64 || used < 2 {
		t.Errorf("keys per master = %v, want 64 spread over at least 2 of %d", sizes, clusterNodes)
	}
}

// startCluster starts a cluster of clusterNodes masters in t's temporary directory and
// returns a client of it; t's cleanup kills the nodes. Without redis-server in PATH, t
// is skipped (failed under $CI).
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not in PATH: no throwaway cluster: %v", err)
		}
		t.Skipf("redis-server is not in PATH, so no throwaway cluster; skipping: %v", err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	var addrs []string
	var nodes []*redis.Client
	for range clusterNodes {
		port := freeClusterPort(t)
		cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+port+".conf"),
			"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, port+".log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addr := "127.0.0.1:" + port
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		addrs, nodes = append(addrs, addr), append(nodes, c)
	}
	for i, c := range nodes {
		eventually(t, 10*time.Second, "node "+addrs[i]+" to answer", func() bool { return c.Ping(ctx).Err() == nil })
		lo, hi := i*16384/clusterNodes, (i+1)*16384/clusterNodes-1
		slots := make([]int, 0, hi-lo+1)
		for s := lo; s <= hi; s++ {
			slots = append(slots, s)
		}
		if err := c.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTS on %s: %v", addrs[i], err)
		}
	}
	for _, addr := range addrs[1:] {
		host, port, _ := net.SplitHostPort(addr)
		if err := nodes[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			t.Fatalf("CLUSTER MEET %s: %v", addr, err)
		}
	}
	for i, c := range nodes {
		eventually(t, 20*time.Second, "node "+addrs[i]+" to see the cluster ok", func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(clusterNodes))
		})
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// freeClusterPort returns a loopback port that is free, as is the cluster bus port
// 10000 above it.
func freeClusterPort(t *testing.T) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err == nil {
			bus.Close()
			return strconv.Itoa(port)
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return ""
}
