// This file holds the host of a journaled operation, which names its retry
// budget and its queue in a resume (resume_fair.go), and how a resume scan
// judges a record by its target before the journal builds it
// (journal.Picker): each pending record is then built about once.

package idem

import (
	"net/url"

	"github.com/idem-go/idem/journal"
)

// recordHost is the host (host:port) of a journaled operation's target,
// "" if it has none.
func recordHost(rec *Record) string {
	target := rec.Target()
	if origin, ok := originOf(target); ok {
		target = origin
	}
	return targetHost(target)
}

// targetHost is budgetHost of target, an absolute URL or its origin.
func targetHost(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	return budgetHost(u)
}

// originOf cuts target, an absolute URL, after its authority
// (scheme://host:port); ok is false if it has none. A journaled URL holds
// no userinfo, so the authority ends at the first '/', '?' or '#'.
func originOf[T string | []byte](target T) (origin T, ok bool) {
	i := 0
	for i < len(target) && isSchemeByte(target[i], i) {
		i++
	}
	if i == 0 || i+3 > len(target) || target[i] != ':' || target[i+1] != '/' || target[i+2] != '/' {
		return origin, false
	}
	for j := i + 3; j < len(target); j++ {
		switch target[j] {
		case '/', '?', '#':
			return target[:j], true
		}
	}
	return target, true
}

// isSchemeByte reports whether c may be byte i of a URL scheme (RFC 3986,
// section 3.1).
func isSchemeByte(c byte, i int) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return true
	case '0' <= c && c <= '9', c == '+', c == '-', c == '.':
		return i > 0
	}
	return false
}

// maxOrigins bounds a scan's cache of hosts: past it, the cache starts
// again.
const maxOrigins = 1024

// originHosts caches the host of each origin a scan has met. Not safe for
// concurrent use.
type originHosts map[string]string

// of returns the host of target's origin; ok is false if it has none.
func (h originHosts) of(target []byte) (host string, ok bool) {
	origin, ok := originOf(target)
	if !ok {
		return "", false
	}
	if host, ok := h[string(origin)]; ok {
		return host, true
	}
	if len(h) == maxOrigins {
		clear(h)
	}
	host = targetHost(string(origin))
	h[string(origin)] = host
	return host, true
}

// picker returns the pick of a scan that leaves out left and reads again
// only what only left out (nil: everything). It passes over what the scan
// would by its host alone: the records of a host left out so far, and
// those not to be read again. It takes as many records of a host as its
// queue had room for when first met, then leaves the host out from there.
// Once every host to be read again is left out, it ends the listing. The
// scan still judges every record it is given: a Store may give a record
// pick did not see.
func (r *resumeRun) picker(left, only *leftOut) func(uint64, []byte) journal.Pick {
	hosts := originHosts{}
	room := map[string]int{}
	return func(seq uint64, target []byte) journal.Pick {
		if only != nil && only.rest == 0 && left.holdsAll(only) {
			return journal.Stop
		}
		host, ok := hosts.of(target)
		if !ok {
			return journal.Take
		}
		if _, held := left.hosts[host]; held || only != nil && !only.takes(host, seq) {
			return journal.Skip
		}
		n, ok := room[host]
		if !ok {
			n = r.pool.roomFor(host)
		}
		if n == 0 {
			left.hold(host, seq)
			r.pool.hold(host)
			return journal.Skip
		}
		room[host] = n - 1
		return journal.Take
	}
}
