// This file holds fairPool, the scheduler of Resume and the background
// resumer: pending operations wait in one queue per host, and each free slot
// goes to the host with the fewest operations being sent.

package idem

import "sync"

// fairPool sends queued records on at most slots goroutines. A host alone
// may use every slot; while another host waits, an operation of a host
// holding more than its share gives its slot up after its current attempt
// or backoff wait (yield). A host's queue holds at most perHost records as
// listed (without their Body), the pool at most maxQueued; add refuses more,
// and the scanner reads them again once there is room. It is safe for
// concurrent use.
type fairPool struct {
	slots, perHost int
	maxQueued      int // 2*perHost: a host alone still queues a whole page
	send           func(host string, rec *Record)

	mu      sync.Mutex
	queues  map[string][]*Record
	order   []string // hosts with queued records, least recently served first
	running map[string]int
	known   map[uint64]bool // records queued or being sent
	full    map[string]bool // hosts add refused since they last had room
	workers int
	closed  bool
	wg      sync.WaitGroup
	// room receives when a host in full has room again, or a full pool has
	// emptied to half; onRoom, if set, is called then too.
	room   chan struct{}
	onRoom func()

	queued   int  // records in queues
	poolFull bool // add refused a record for want of room in the pool
}

func newFairPool(slots, perHost int, send func(host string, rec *Record)) *fairPool {
	return &fairPool{slots: slots, perHost: perHost, maxQueued: 2 * perHost, send: send, queues: map[string][]*Record{},
		running: map[string]int{}, known: map[uint64]bool{}, full: map[string]bool{},
		room: make(chan struct{}, 1)}
}

// added is what add did with a record.
type added struct {
	ok       bool // queued, or already queued or being sent
	poolFull bool // not queued: the pool is full (else host's queue is)
	// evicted, if set, was the last queued record of evictedHost, the host
	// with the longest queue: the record added took its place in the full
	// pool. It is no longer queued, and evictedHost's queue counts as full.
	evicted     *Record
	evictedHost string
}

// add queues rec for host, unless it is queued or being sent already. It
// queues nothing if host's queue is full, or if the pool is full and no
// queue is at least two longer than host's; else a full pool evicts the
// last record of the longest queue, so hosts queued first cannot keep
// another out.
func (p *fairPool) add(host string, rec *Record) added {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known[seqOf(rec)] || p.closed {
		return added{ok: true}
	}
	q := p.queues[host]
	if len(q) >= p.perHost {
		p.full[host] = true
		return added{}
	}
	res := added{ok: true}
	if p.queued >= p.maxQueued {
		h := p.longest()
		if len(p.queues[h]) < len(q)+2 {
			p.poolFull = true
			return added{poolFull: true}
		}
		res.evictedHost, res.evicted = h, p.evictLast(h)
	}
	if len(q) == 0 {
		p.order = append(p.order, host)
	}
	p.queues[host] = append(q, rec)
	p.queued++
	p.known[seqOf(rec)] = true
	return res
}

// roomFor returns how many more records host's queue takes.
func (p *fairPool) roomFor(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.perHost-len(p.queues[host]))
}

// hold notes that a scanner left host's records out, as add does when it
// refuses one: the scanner is told once host's queue is at most half full.
// It reports whether it is already.
func (p *fairPool) hold(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.full[host] = true
	return len(p.queues[host]) <= p.perHost/2
}

// longest returns the host with the longest queue. p.mu is held. It scans
// the queued hosts, at most maxQueued, and runs only when the pool is full.
func (p *fairPool) longest() string {
	best := ""
	for _, h := range p.order {
		if len(p.queues[h]) > len(p.queues[best]) {
			best = h
		}
	}
	return best
}

// evictLast takes host's last queued record out of the pool, host's queue
// holding at least two. p.mu is held.
func (p *fairPool) evictLast(host string) *Record {
	q := p.queues[host]
	rec := q[len(q)-1]
	q[len(q)-1] = nil
	p.queues[host] = q[:len(q)-1]
	p.queued--
	delete(p.known, seqOf(rec))
	p.full[host] = true // signal once it has room: the scanner reads rec again
	return rec
}

// pump starts workers for the queued records, up to slots.
func (p *fairPool) pump() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.workers < p.slots && !p.closed {
		host, rec := p.next()
		if rec == nil {
			return
		}
		p.workers++
		// A worker's stack, grown deep by net/http and bbolt, serves many.
		p.wg.Go(func() {
			for rec != nil {
				p.send(host, rec)
				host, rec = p.done(host, rec)
			}
		})
	}
}

// done ends the send of rec and returns the worker's next record, if any.
func (p *fairPool) done(host string, rec *Record) (string, *Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[host]--; p.running[host] == 0 {
		delete(p.running, host)
	}
	delete(p.known, seqOf(rec))
	if !p.closed {
		if h, r := p.next(); r != nil {
			return h, r
		}
	}
	p.workers--
	return "", nil
}

// next takes a queued record of the host with the fewest records being sent,
// the least recently served among equals; p.mu is held. The scan stops at
// the first host with none, at most slots+1 in: O(slots), not O(hosts).
func (p *fairPool) next() (string, *Record) {
	best := -1
	for i, h := range p.order {
		if best < 0 || p.running[h] < p.running[p.order[best]] {
			best = i
		}
		if p.running[h] == 0 {
			break
		}
	}
	if best < 0 {
		return "", nil
	}
	host := p.order[best]
	q := p.queues[host]
	rec := q[0]
	q[0] = nil
	q = q[1:]
	p.queued--
	p.running[host]++
	// Remove order[best] by moving the hosts before it, not after it; the
	// last one (a host alone) by shortening order, whose room the append
	// below then reuses rather than growing a new array each time.
	if best == len(p.order)-1 {
		p.order[best] = ""
		p.order = p.order[:best]
	} else {
		copy(p.order[1:best+1], p.order[:best])
		p.order[0] = ""
		p.order = p.order[1:]
	}
	if len(q) == 0 {
		delete(p.queues, host)
	} else {
		p.queues[host] = q
		p.order = append(p.order, host)
	}
	if p.full[host] && len(q) <= p.perHost/2 {
		delete(p.full, host)
		p.signal()
	}
	p.roomInPool()
	return host, rec
}

// roomInPool signals once a full pool has emptied to half. p.mu is held.
func (p *fairPool) roomInPool() {
	if p.poolFull && p.queued <= p.maxQueued/2 {
		p.poolFull = false
		p.signal()
	}
}

// yield reports whether an operation of host should give its slot up after
// its current attempt: every slot is busy, and another host with queued
// records has at least two fewer being sent, so that the slot evens them.
func (p *fairPool) yield(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers < p.slots || p.closed {
		return false
	}
	n := p.running[host]
	if n < 2 {
		return false // no host has fewer than none: not a scan of every host
	}
	for _, h := range p.order {
		if h != host && p.running[h] < n-1 {
			return true
		}
	}
	return false
}

// drop forgets host's queued records: they stay pending, for a later pass.
func (p *fairPool) drop(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(host)
}

func (p *fairPool) dropLocked(host string) {
	for _, rec := range p.queues[host] {
		delete(p.known, seqOf(rec))
	}
	p.queued -= len(p.queues[host])
	if _, ok := p.queues[host]; ok {
		delete(p.queues, host)
		for i, h := range p.order {
			if h == host {
				p.order = append(p.order[:i], p.order[i+1:]...)
				break
			}
		}
	}
	if p.full[host] {
		delete(p.full, host)
		p.signal()
	}
	p.roomInPool()
}

// signal tells a scanner waiting for room. p.mu is held.
func (p *fairPool) signal() {
	select {
	case p.room <- struct{}{}:
	default:
	}
	if p.onRoom != nil {
		p.onRoom()
	}
}

// wait returns once every queued record has been sent.
func (p *fairPool) wait() { p.wg.Wait() }

// close drops the queued records, starts nothing more, and waits for the
// sends in progress.
func (p *fairPool) close() {
	p.mu.Lock()
	p.closed = true
	for host := range p.queues {
		p.dropLocked(host)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
