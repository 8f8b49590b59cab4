// This file holds the journal's group commit queue (journal.go holds the
// file, read.go its reads, deferred.go the state changes that ride along,
// commit_tx.go the transaction each commit runs).
// Write-aheads from concurrent calls share one fsynced bbolt
// transaction, run by one commit loop: a write that finds no commit running
// is committed at once (no fixed delay); writes that arrive meanwhile queue
// up, and the loop commits the whole queue once the running commit returns
// and it has yielded once (runtime.Gosched), so that the writers that
// commit woke can run first, without waiting for a writer to be scheduled
// to lead it. State
// changes (settle, give-up, fail, expire) are
// deferred: they ride along with the next commit, or are committed within
// flushDelay, or on Close. Losing one in a crash only costs a harmless replay
// with the same key.

package boltjournal

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/idem-go/idem/journal"
	bolt "go.etcd.io/bbolt"
)

// flushDelay bounds how long a deferred state change waits for a write-ahead
// commit to ride along with.
const flushDelay = 20 * time.Millisecond

// appendFill is how full bbolt packs a page of a bucket whose keys are
// appended in order.
const appendFill = 0.9

// pruneInterval is how often a long-running writer prunes finished records,
// so the file stays bounded by Retention without a restart. A Retention
// under 40 minutes is pruned every quarter of it instead (pruneEvery).
const pruneInterval = 10 * time.Minute

// pruneEvery is the periodic prune's interval for retention: at most a
// quarter of it, so the file holds at most 1.25 times Retention of finished
// records, and at least a second apart. (In a soak, a 3-minute Retention
// pruned every 10 minutes let one 4-minute worker life grow the file from
// 10.5 to 17.5 MiB; restarts, which prune at Open, had kept it flat.)
func pruneEvery(retention time.Duration) time.Duration {
	return max(min(pruneInterval, retention/4), time.Second)
}

// committer is the Journal's write queue. Its fields are guarded by mu.
type committer struct {
	mu      sync.Mutex
	idle    *sync.Cond // signalled when leading turns false
	leading bool       // the commit loop is committing; writes queue behind it
	closed  bool
	held    bool // a test holds commits back (holdCommits)
	// kick holds a token when the commit loop has work: a queued write, or
	// deferred changes due. The loop runs from the first kick (looping)
	// until stop is closed; loopDone is closed when it returns.
	kick     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	looping  bool
	queue    []*write
	deferred map[uint64]*deferredWrite // newest state per record ID, not yet committed
	flushing map[uint64]*deferredWrite // what the running commit is writing
	// spareQueue and spareDeferred are a commit's queue and deferred map,
	// emptied, for the next commit to fill: no allocation per commit.
	spareQueue    []*write
	spareDeferred map[uint64]*deferredWrite
	timer         *time.Timer
	timerGen      uint64  // counts the timers armed: a stopped one's late call knows it is stale
	history       history // settled records owed to the done bucket (history.go)
	// lastPrune is when the periodic prune last started.
	lastPrune time.Time
}

// write is one queued write-ahead, a failed record made pending again
// (repend), or a flush marker when rec is nil, which may carry a read.
type write struct {
	rec    *Record
	repend bool
	// read, on a flush marker, reads the file once its commit returned,
	// before another can start (readFlushed).
	read   func(*bolt.Tx) error
	keys   [][]byte // index entries: operation ID, and a caller-chosen key
	data   []byte   // the metadata as stored
	body   []byte   // the body as stored, for an insert, unless staged
	staged uint64   // the record ID its body is staged under (stageBody), or 0
	id     uint64
	err    error
	// wake receives once the write is committed or failed (id and err are
	// set).
	wake chan struct{}
}

func (c *committer) init() {
	c.idle = sync.NewCond(&c.mu)
	c.deferred = make(map[uint64]*deferredWrite)
	c.kick, c.stop = make(chan struct{}, 1), make(chan struct{})
}

// insert writes a new pending record and returns once the commit, fsync
// included, has returned. It fails with journal.ErrNameTaken if the operation ID, or a
// caller-chosen key (callerKey), is already taken. seqOf(rec) is set only once the
// commit has returned: a failed insert leaves no trace, in the file or on rec.
// With a Keyring, the record is sealed under its Current key, here, before
// the queue: the commit's critical section does no cryptography.
func (j *Journal) insert(rec *Record, callerKey bool) error {
	if j.sealedFile {
		return j.errNeedsKeyring()
	}
	rec.CallerKey = callerKey
	if rec.BodySHA256 == "" { // reads check the body against it (Record.BodyMatches)
		rec.BodySHA256 = journal.BodySum(rec.Body)
	}
	rec.EncryptionKeyID = j.keyring.ring().Current()
	staged := len(rec.Body) >= stageMin
	if staged && rec.EncryptionKeyID != "" {
		setBodySegment(rec, stageStep) // sealed in parts (sealSegment), named in its metadata
	}
	room := 0
	if !staged && len(rec.Body) <= inlineMax {
		room = len(rec.Body) + 64 // the body inline, sealed or not
	}
	data, err := j.keyring.encodeMetaRoom(rec, room)
	if err != nil {
		return err
	}
	w := &write{rec: rec, keys: indexKeys(rec), data: data}
	switch {
	case staged && rec.EncryptionKeyID != "":
		seal := func(dst []byte, i int, part []byte, last bool) ([]byte, error) {
			return j.keyring.sealSegment(dst, rec, i, part, last)
		}
		w.staged, err = j.stageBody(rec.Body, bodySegment(rec), seal)
	case staged:
		w.staged, err = j.stageBody(rec.Body, j.plainStep(), nil)
	default:
		w.body, err = j.keyring.encodeBody(rec)
		if err == nil && len(w.body) <= inlineMax {
			w.data, w.body = appendBody(w.data, w.body), nil // inline.go
		}
	}
	if err != nil {
		return err
	}
	if err := j.submit(w); err != nil {
		if w.staged != 0 && !errors.Is(err, journal.ErrNameTaken) { // that one dropped it
			j.unstage(idKey(w.staged)) // else the next open drops it
		}
		return err
	}
	setSeq(rec, w.id)
	j.writeAheads.Add(1)
	return nil
}

// errNeedsKeyring refuses a new record in a journal once opened with
// Options.Encryption and now opened without it: it would go to disk in
// plaintext.
func (j *Journal) errNeedsKeyring() error {
	return fmt.Errorf("%w: %s was written with Options.Encryption (it is marked %s): new records need it too",
		journal.ErrInvalidOptions, j.path, versionSealed)
}

// errRepend means a failed record was pruned before it could be sent again.
var errRepend = journal.ErrGone

// repend writes a pending record durably: above all a failed one made
// pending again (journal.EventRepend), before it is sent again: from then on
// the server may act, so a crash must leave it for Resume.
func (j *Journal) repend(rec *Record) error {
	data, err := j.keyring.encodeMeta(stored(rec))
	if err != nil {
		return err
	}
	j.changes.begin(seqOf(rec))
	defer j.changes.end(seqOf(rec))
	return j.submit(&write{rec: rec, repend: true, data: data})
}

// flush commits every deferred state change made before it was called.
func (j *Journal) flush() error {
	if j.readOnly {
		return nil
	}
	return j.submit(&write{})
}

// readFlushed commits every deferred state change made before it was
// called, settled records owed included (history.go), and runs read in a
// read transaction before any other commit: no settle made meanwhile can
// have left a record in neither bucket (its settled record still owed), as
// one could between a flush and a later read.
func (j *Journal) readFlushed(read func(*bolt.Tx) error) error {
	if j.readOnly {
		return j.view(read)
	}
	return j.submit(&write{read: read})
}

// wakes are write.wake channels, empty, for the next writes: submit
// receives the value sent on its write's channel before it returns.
var wakes = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// submit queues w and waits until a commit that includes it has returned.
func (j *Journal) submit(w *write) error {
	w.wake = wakes.Get().(chan struct{})
	defer wakes.Put(w.wake)
	c := &j.commit
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s", journal.ErrClosed, j.path)
	}
	c.queue = append(c.queue, w)
	j.kickLoop()
	c.mu.Unlock()
	<-w.wake
	return w.err
}

// kickLoop tells the commit loop it has work, starting it first if need
// be. c.mu must be held, and the committer not closed.
func (j *Journal) kickLoop() {
	c := &j.commit
	if !c.looping {
		c.looping, c.loopDone = true, make(chan struct{})
		go j.commitLoop(c.loopDone)
	}
	select {
	case c.kick <- struct{}{}:
	default: // a kick is already waiting
	}
}

// commitLoop commits whatever is queued and deferred each time it is
// kicked, and again, after one yield, while writes queued during a commit,
// until Close stops it.
func (j *Journal) commitLoop(done chan struct{}) {
	defer close(done)
	c := &j.commit
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		for j.lead() {
			// The writers that commit woke are runnable now: yield, so that
			// they can send their requests while the next transaction is
			// built rather than after it, and write-aheads and settles made
			// meanwhile join it. With nothing else to run this returns at
			// once; it adds no fixed delay.
			runtime.Gosched()
		}
	}
}

// stopLoop ends the commit loop, if it ever ran, once it is idle. c.mu must
// be held, and the committer closed: nothing kicks it again.
func (j *Journal) stopLoop() {
	c := &j.commit
	for c.leading || len(c.queue) > 0 {
		c.idle.Wait()
	}
	if !c.looping {
		return
	}
	c.looping = false
	close(c.stop)
	done := c.loopDone
	c.mu.Unlock()
	<-done
	c.mu.Lock()
}

// lead commits everything queued and deferred in one transaction. It
// reports whether writes queued meanwhile, for the commit loop to commit
// next.
func (j *Journal) lead() (again bool) {
	c := &j.commit
	c.mu.Lock()
	for c.held {
		c.idle.Wait()
	}
	c.leading = true
	select {
	case <-c.kick: // this commit takes what a waiting kick was for
	default:
	}
	batch := c.queue
	c.queue, c.spareQueue = c.spareQueue, nil
	if len(c.deferred) > 0 {
		c.flushing, c.deferred, c.spareDeferred = c.deferred, c.spareDeferred, nil
		if c.deferred == nil {
			c.deferred = make(map[uint64]*deferredWrite)
		}
		// Nothing is left waiting: the flush timer is for changes made from now
		// on (armed by save, or below once this commit returns). Left running, it
		// would start a commit of its own under load, splitting the group of
		// write-aheads that was about to form.
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
	}
	settles := c.flushing
	// A flush (a nil rec) writes every settle made before it whole. A
	// change to a record whose settled record is owed needs it written
	// first, or move would find the record nowhere.
	flush := slices.ContainsFunc(batch, func(w *write) bool { return w.rec == nil })
	owed := c.history.take(flush || c.history.holdsAny(settles))
	c.mu.Unlock()

	left, err := j.commitBatch(batch, settles, owed, !flush)
	for _, w := range batch { // still leading: no commit comes between
		if w.read != nil && w.err == nil {
			w.err = j.view(w.read)
		}
	}

	c.mu.Lock()
	if err != nil {
		// Keep the changes for the next commit, unless newer ones came.
		for id, d := range settles {
			if _, newer := c.deferred[id]; !newer {
				c.deferred[id] = d
			}
		}
		c.history.failed(j.now()) // the settles go back to deferred; what was owed stays owed
	} else {
		c.history.committed(j.now(), left)
	}
	c.flushing = nil
	if settles != nil {
		clear(settles)
		c.spareDeferred = settles
	}
	if now, keep := j.now(), j.retention; keep > 0 && !c.closed && now.Sub(c.lastPrune) >= pruneEvery(keep) {
		c.lastPrune = now
		j.pruning.Go(func() { j.Prune(keep) }) // an error leaves it to the next round
	}
	if again = len(c.queue) > 0; !again {
		c.leading = false
		if len(c.deferred) > 0 && c.timer == nil && !c.closed {
			j.armFlush()
		}
		c.idle.Broadcast()
	}
	if !c.closed && c.history.unarmed() {
		c.history.arm(j.now(), j.flushHistory)
	}
	c.mu.Unlock()
	for _, w := range batch {
		w.wake <- struct{}{}
	}
	clear(batch)
	c.mu.Lock()
	c.spareQueue = batch[:0]
	c.mu.Unlock()
	return again
}
