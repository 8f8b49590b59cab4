// This file holds the Journal's clock: the database's, read through an
// offset from the local clock that Open measures and the heartbeat keeps
// up to date, so that reading it costs no round trip.

package pgjournal

import (
	"context"
	"time"
)

// Now returns the database's time, as this instance best knows it: the
// local clock plus the offset last measured (to within half a round trip).
// A Transport over the Journal reads its time here (journal.Clock), so the
// created, due and expiry times of a fleet agree whatever the instances'
// own clocks say.
func (j *Journal) Now() time.Time { return j.local().Add(time.Duration(j.offset.Load())) }

// syncClock measures the offset of the database's clock from the local one.
func (j *Journal) syncClock(ctx context.Context) error {
	before := j.local()
	var db time.Time
	if err := j.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		return j.fail("read the database's clock", err)
	}
	after := j.local()
	mid := before.Add(after.Sub(before) / 2)
	j.offset.Store(int64(db.Sub(mid)))
	return nil
}
