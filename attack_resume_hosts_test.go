// Attack: a Resume pass over a journal whose pending operations go to many
// hosts, as a webhook sender's do after an outage: one operation per host,
// tens of thousands of hosts.

package idem

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// The pool queues every host's records while its slots are busy. Choosing
// the next record must not cost a scan of every queued host: with 30,000
// hosts that made the scheduling alone take about a minute of CPU, under
// the pool's lock (quadratic), where sending took no time at all.
func TestAttackFairPoolManyHostsLinear(t *testing.T) {
	const hosts = 30000
	gate := make(chan struct{})
	var sent atomic.Int64
	var p *fairPool
	p = newFairPool(DefaultResumeConcurrency, pendingPage, func(h string, _ *Record) {
		<-gate
		p.yield(h) // as each attempt of a resumed operation asks
		sent.Add(1)
	})
	for i := range hosts {
		p.add(fmt.Sprintf("h%d.example:443", i), &Record{ID: uint64(i + 1)})
		if (i+1)%pendingPage == 0 {
			p.pump()
		}
	}
	p.pump()
	start := time.Now()
	close(gate)
	p.wait()
	took := time.Since(start)
	if sent.Load() != hosts {
		t.Fatalf("sent %d of %d", sent.Load(), hosts)
	}
	// Linear, this takes tens of milliseconds (a second or so under -race).
	if took > 10*time.Second {
		t.Fatalf("scheduling %d one-record hosts took %v", hosts, took)
	}
	t.Logf("%d hosts: %v", hosts, took)
}

// Before resume fairness, a pass held one page of pending records (and the
// ResumeConcurrency being sent) in memory, whatever the journal held. Now
// the scan queues every due record of every host whose queue is not full,
// before the slots free up: with one record per host, the whole pending
// bucket's metadata is in memory at once.
func TestAttackResumeQueuesBoundedAcrossHosts(t *testing.T) {
	t.Skip("defect: the fair pool's queues are bounded per host (a page) but not in total: a Resume pass over N one-operation hosts holds all N records in memory (resume_pass.go scan, resume_fair.go add)")
	const hosts = 3000
	gate := make(chan struct{})
	var p *fairPool
	p = newFairPool(DefaultResumeConcurrency, pendingPage, func(string, *Record) { <-gate })
	queued := 0
	for i := range hosts {
		if p.add(fmt.Sprintf("h%d.example:443", i), &Record{ID: uint64(i + 1)}) {
			queued++
		}
		if (i+1)%pendingPage == 0 {
			p.pump()
		}
	}
	p.mu.Lock()
	held := len(p.known)
	p.mu.Unlock()
	close(gate)
	p.wait()
	if held > 4*pendingPage {
		t.Fatalf("the pool held %d records at once (one page is %d)", held, pendingPage)
	}
}
