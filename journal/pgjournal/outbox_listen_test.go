package pgjournal

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Run's connection keeps listening after a wait that timed out (its poll),
// so a commit after many quiet polls still wakes it.
func TestListenSurvivesPollTimeout(t *testing.T) {
	pool := testPool(t)
	j := openTest(t, pool, Options{Schema: testSchema(t, pool), Namespace: namespace(t)})
	conn := NewOutbox(j, nil).listen(context.Background())
	if conn == nil {
		t.Fatal("listen failed")
	}
	defer conn.Close(context.Background())
	for range 3 {
		wait, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := conn.WaitForNotification(wait)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
			t.Fatalf("a quiet wait: %v, closed %v; want a timeout on an open connection", err, conn.IsClosed())
		}
	}
	if _, err := pool.Exec(context.Background(), `SELECT pg_notify($1, '')`, j.channel()); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conn.WaitForNotification(wait); err != nil {
		t.Fatalf("the notification after the timeouts: %v", err)
	}
}
