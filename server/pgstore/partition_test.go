// partition_test.go: S39 on PostgreSQL, an instance cut off from the database by a real network
// fault (both ways, outward, replies only) for longer than its lease while another takes
// over: the cut-off handler is cancelled before the other starts, and the effect happens
// once.

package pgstore_test

import (
	"testing"

	"github.com/idem-go/idem/server/servertest"
)

func TestS39PartitionLongerThanLease(t *testing.T) {
	servertest.Partition(t, servertest.NetConfig{Open: openLink})
}
