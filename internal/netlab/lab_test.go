//go:build linux

// lab_test.go checks each of a Lab's faults between hosts: what reaches the
// far side during the fault, what the near side sees, that a third host is
// not touched, that both old and new connections work after the heal; then
// that Close leaves nothing, and that bad faults are refused.

package netlab

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLabFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(a, b *Host) *Fault
		reaches bool // a's bytes sent during the fault reach b
	}{
		{"Partition", func(a, b *Host) *Fault { return &Fault{Kind: Partition, From: a, To: b} }, false},
		{"OneWay_requests", func(a, b *Host) *Fault { return &Fault{Kind: OneWay, From: a, To: b} }, false},
		{"OneWay_replies", func(a, b *Host) *Fault { return &Fault{Kind: OneWay, From: b, To: a} }, true},
		{"Isolate", func(a, b *Host) *Fault { return &Fault{Kind: Isolate, From: a} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, hosts := newLab(t, "a", "b", "c")
			a, b, c := hosts[0], hosts[1], hosts[2]
			for _, h := range hosts {
				if !netip.MustParsePrefix(labRange).Contains(h.IP) {
					t.Fatalf("host %s has address %s, outside %s", h, h.IP, labRange)
				}
			}
			e := newEcho(t, b)
			conn, err := dialFrom(a, e.Addr, patience)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := roundTrip(conn, "before"); err != nil {
				t.Fatal(err)
			}
			e.Received(t, "before")

			f := tc.fault(a, b)
			if err := l.Apply(f); err != nil {
				t.Fatal(err)
			}
			if err := l.Apply(f); err != nil { // in force already: nothing to do
				t.Fatal(err)
			}
			conn.SetWriteDeadline(time.Now().Add(patience))
			if _, err := conn.Write([]byte("during")); err != nil {
				t.Fatal(err)
			}
			silent(t, conn)
			if tc.reaches {
				e.Received(t, "during")
			} else {
				e.ReceivedNothing(t)
			}
			start := time.Now()
			if c2, err := dialFrom(a, e.Addr, silence); err == nil {
				c2.Close()
				t.Fatalf("a new connect from a to b went through the fault")
			} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() || time.Since(start) < silence {
				t.Fatalf("a new connect during the fault: %v after %v, want its deadline to run out", err, time.Since(start))
			}
			// A third host is not touched.
			c3, err := dialFrom(c, e.Addr, patience)
			if err != nil {
				t.Fatalf("c to b during a fault between a and b: %v", err)
			}
			defer c3.Close()
			if err := roundTrip(c3, "c"); err != nil {
				t.Fatalf("c to b during a fault between a and b: %v", err)
			}
			e.Received(t, "c")

			if err := l.Heal(f); err != nil {
				t.Fatal(err)
			}
			if err := l.Heal(f); err != nil { // healed already
				t.Fatal(err)
			}
			// Nothing was reset: the old connection resumes when the
			// kernel retransmits.
			if !tc.reaches {
				e.Received(t, "during")
			}
			conn.SetReadDeadline(time.Now().Add(patience))
			buf := make([]byte, len("during"))
			if _, err := conn.Read(buf); err != nil || string(buf) != "during" {
				t.Fatalf("after the heal, the old connection read %q, %v", buf, err)
			}
			c4, err := dialFrom(a, e.Addr, patience)
			if err != nil {
				t.Fatalf("a new connect after the heal: %v", err)
			}
			defer c4.Close()
			if err := roundTrip(c4, "after"); err != nil {
				t.Fatal(err)
			}
			e.Received(t, "after")
		})
	}
}

// TestLabLoss sends datagrams from a to b through 50% loss: about half
// arrive, and all of them once healed.
func TestLabLoss(t *testing.T) {
	t.Parallel()
	need(t, LossUnavailable())
	l, hosts := newLab(t, "a", "b")
	a, b := hosts[0], hosts[1]
	var pc net.PacketConn
	if err := b.NS.Do(func() (err error) { pc, err = net.ListenPacket("udp4", b.IP.String()+":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// send sends n datagrams from a while b counts them, and returns the
	// count once nothing has come for the silence window.
	send := func(n int) int {
		c, err := a.NS.DialContext(t.Context(), "udp4", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		counted := make(chan int)
		go func() {
			got, buf := 0, make([]byte, 16)
			for {
				pc.SetReadDeadline(time.Now().Add(silence))
				if _, _, err := pc.ReadFrom(buf); err != nil {
					counted <- got
					return
				}
				got++
			}
		}()
		for range n {
			c.Write([]byte("x"))
			time.Sleep(100 * time.Microsecond)
		}
		return <-counted
	}
	f := &Fault{Kind: Loss, From: a, To: b, Percent: 50}
	if err := l.Apply(f); err != nil {
		t.Fatal(err)
	}
	const n = 400
	if got := send(n); got < n/4 || got > n*3/4 {
		t.Fatalf("%d of %d datagrams arrived through 50%% loss", got, n)
	}
	if err := l.Heal(f); err != nil {
		t.Fatal(err)
	}
	if got := send(n); got != n {
		t.Fatalf("%d of %d datagrams arrived after the heal", got, n)
	}
}

// TestLabClose checks that Close leaves no namespace of the Lab's, with
// faults in force and a connection open, and that the root namespace never
// had an interface of the Lab's.
func TestLabClose(t *testing.T) {
	need(t, Unavailable())
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.AddHost("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.AddHost("b")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("in use", func(t *testing.T) {
		e := newEcho(t, b)
		c, err := dialFrom(a, e.Addr, patience)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, f := range []*Fault{{Kind: Partition, From: a, To: b}, {Kind: OneWay, From: b, To: a}, {Kind: Isolate, From: b}} {
			if err := l.Apply(f); err != nil {
				t.Fatal(err)
			}
		}
	})
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifaces {
		if i.Name == "h1" || i.Name == "h2" || i.Name == "lab0" {
			t.Errorf("the root namespace has interface %s", i.Name)
		}
	}
	names := []string{l.hub.Name, a.NS.Name, b.NS.Name}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	for _, n := range names {
		if _, err := os.Stat(NSDir + "/" + n); err == nil {
			t.Errorf("namespace %s left", n)
		}
	}
	if _, err := l.AddHost("c"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("AddHost after Close: %v, want an error", err)
	}
}

func TestLabRefusesBadFaults(t *testing.T) {
	t.Parallel()
	l, hosts := newLab(t, "a", "b")
	_, other := newLab(t, "x")
	for _, f := range []*Fault{
		{Kind: Partition, From: hosts[0]},
		{Kind: OneWay, From: hosts[0], To: other[0]},
		{Kind: Loss, From: hosts[0], To: hosts[1], Percent: 0},
		{Kind: Loss, From: hosts[0], To: hosts[1], Percent: 101},
	} {
		if err := l.Apply(f); err == nil {
			t.Errorf("Apply(%v) = nil, want an error", f)
			l.Heal(f)
		}
	}
}
