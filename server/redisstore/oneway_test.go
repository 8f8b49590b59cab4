// oneway_test.go: S42 on Redis, an instance (middleware or consumer) whose link to Redis
// is cut one way (replies lost, or requests dropped) for longer than its lease while
// another instance takes over, then healed: one effect per key and message, nothing left
// in progress.

package redisstore_test

import (
	"testing"

	"github.com/idem-go/idem/server/servertest"
)

func TestS42OneWayPartition(t *testing.T) {
	servertest.OneWay(t, servertest.NetConfig{Open: openLink})
}
