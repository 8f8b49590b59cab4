// S30: the instances' clocks disagree by minutes. Leases are judged by the
// database alone (lease.go's SQL reads now()), and a Journal's Now is the
// database's clock whatever the local one says; a Transport reads its time
// there (journal.Clock, tested in the root package).

package pgjournal

import (
	"testing"
	"time"
)

// skewed is a local clock off by d.
func skewed(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }

func TestS30NowIsTheDatabasesClock(t *testing.T) {
	pool := testPool(t)
	opts := Options{Schema: testSchema(t, pool), Namespace: namespace(t)}
	ahead, behind := opts, opts
	ahead.local, behind.local = skewed(10*time.Minute), skewed(-7*time.Minute)
	a, b := openTest(t, pool, ahead), openTest(t, pool, behind)
	var db time.Time
	if err := pool.QueryRow(bg, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	for name, j := range map[string]*Journal{"10 min ahead": a, "7 min behind": b} {
		if d := j.Now().Sub(db); d < -time.Second || d > time.Second {
			t.Errorf("a Journal whose local clock is %s reads the database's time %v off", name, d)
		}
	}
}
