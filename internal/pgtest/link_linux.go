//go:build linux

// link_linux.go puts the test server behind a link a test can cut (internal/netfault), for
// the tests that fault their connections to PostgreSQL for real (pgstore's, pgjournal's).

package pgtest

import (
	"net"
	"strconv"
	"testing"

	"github.com/idem-go/idem/internal/netfault"
)

// Link makes a netfault link to the test server at host and port (its parsed URL's) and
// returns it, with the IP address and port that reach the server through it: point the
// client's configuration at them, with no fallback hosts, and dial with link.DialContext.
// Like netfault.New, call it before making the client.
func Link(tb testing.TB, host string, port uint16) (link *netfault.Link, ip string, linkPort uint16) {
	tb.Helper()
	link = netfault.New(tb, net.JoinHostPort(host, strconv.Itoa(int(port))))
	addr, err := net.ResolveTCPAddr("tcp", link.Addr())
	if err != nil {
		tb.Fatalf("pgtest: the link's address %q: %v", link.Addr(), err)
	}
	return link, addr.IP.String(), uint16(addr.Port)
}
