package brokertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/childtest"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/consumer"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

// lease is the consumers' claim lease: how long a message whose consumer died mid-run
// stays Busy before the PostgreSQL variant runs it again.
const lease = time.Second

// run is what one consumer process needs: where the queue and the database are, its name
// in the effects table, and where it dies.
type run struct {
	Queue, Schema, Name string
	CrashAt             string // a message ID; "" for none
	Crash               string // "before-ack": after the done-mark committed; "mid-handler": before it
}

// S36: consumers of one RabbitMQ queue process each message once, the effect and the
// done-mark in one PostgreSQL transaction (pgstore.CompleteTx). The first consumer
// process is SIGKILLed after committing a message and before acking it: the broker
// redelivers it, and the next consumer finds it done and acks it without running it. The
// second is SIGKILLed in the middle of a handler: its transaction rolls back, its claim
// stays until the lease lapses, and the next consumer then runs the message again. Every
// message ends with exactly one effect.
func TestS36ConsumerKilledBeforeItsAck(t *testing.T) {
	if os.Getenv("IDEM_S36_CHILD") != "" {
		return // the child runs from TestMain
	}
	pool, schema := testDatabase(t)
	ch := testChannel(t)
	queue := "idem-s36-" + rand.Text()[:8]
	if _, err := ch.QueueDeclare(queue, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.QueueDelete(queue, false, false, false) })
	const n = 30
	for i := range n {
		err := ch.PublishWithContext(context.Background(), "", queue, false, false,
			amqp.Publishing{MessageId: msgID(i), Body: []byte(msgID(i))})
		if err != nil {
			t.Fatal(err)
		}
	}

	var childLines []string // what the killed consumers printed
	for _, r := range []run{
		{Queue: queue, Schema: schema, Name: "c1", CrashAt: msgID(5), Crash: "before-ack"},
		{Queue: queue, Schema: schema, Name: "c2", CrashAt: msgID(12), Crash: "mid-handler"},
	} {
		childLines = append(childLines, killAtCrash(t, r)...)
	}

	// A third consumer, this process, takes the rest and the redeliveries.
	store, err := pgstore.Open(context.Background(), pool, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	results := map[string][]consumer.Result{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = consume(ctx, ch, run{Queue: queue, Schema: schema, Name: "c3"}, pool, store, t.Logf, func(id string, res consumer.Result) bool {
		results[id] = append(results[id], res)
		return effects(t, pool, schema) == n
	})
	if err != nil {
		t.Fatalf("the third consumer: %v (results so far %v)", err, results)
	}

	rows, err := pool.Query(context.Background(), `SELECT msg_id, count(*), min(consumer) FROM `+
		pgx.Identifier{schema}.Sanitize()+`.effects GROUP BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for rows.Next() {
		var id, who string
		var count int
		if err := rows.Scan(&id, &count, &who); err != nil {
			t.Fatal(err)
		}
		if count != 1 {
			t.Errorf("message %s has %d effects, want exactly one", id, count)
		}
		by[id] = who
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(by) != n {
		t.Fatalf("%d messages have an effect, want %d", len(by), n)
	}
	// The message c1 committed before dying: its effect is c1's, and its redelivery was
	// acked as a duplicate, never run.
	redelivered := contains(results[msgID(5)], consumer.Duplicate)
	for _, line := range childLines {
		redelivered = redelivered || strings.HasPrefix(line, "c2 result m-05 duplicate")
	}
	if by[msgID(5)] != "c1" || !redelivered {
		t.Errorf("message 5: effect by %q, its redeliveries duplicates: %v; want c1's effect, and a redelivery acked as a duplicate",
			by[msgID(5)], redelivered)
	}
	// The message c2 died running: rolled back, busy while its lease ran, then run by c3.
	if by[msgID(12)] != "c3" || !contains(results[msgID(12)], consumer.Processed) {
		t.Errorf("message 12: effect by %q, results %v; want c3's, after its lease lapsed", by[msgID(12)], results[msgID(12)])
	}
}

func msgID(i int) string { return fmt.Sprintf("m-%02d", i) }

func contains(rs []consumer.Result, want consumer.Result) bool {
	for _, r := range rs {
		if r == want {
			return true
		}
	}
	return false
}

// killAtCrash runs a consumer process until it prints that it reached its crash point,
// SIGKILLs it, and returns the lines it printed, each prefixed with its name.
func killAtCrash(t *testing.T, r run) []string {
	t.Helper()
	cfg, _ := json.Marshal(r)
	cmd := childtest.Command(context.Background(), "^TestS36ConsumerKilledBeforeItsAck$", "IDEM_S36_CHILD="+string(cfg))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("consumer %s exited before its crash point: %v", r.Name, cmd.ProcessState)
			}
			seen = append(seen, r.Name+" "+line)
			if strings.HasPrefix(line, "crash ") {
				childtest.Kill(t, cmd, nil, "consumer "+r.Name, func() string { return strings.Join(seen, "\n") })
				go func() {
					for range lines {
					}
				}()
				return seen
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("consumer %s never reached its crash point", r.Name)
		}
	}
}

// consume processes the queue's deliveries until done returns true after a message or
// ctx ends, acking what is done and requeueing the rest, as a consumer process does.
// It reports each result and its crash point with say.
func consume(ctx context.Context, ch *amqp.Channel, r run, pool *pgxpool.Pool, store *pgstore.Store, say func(string, ...any), done func(id string, res consumer.Result) bool) error {
	if err := ch.Qos(5, 0, false); err != nil {
		return err
	}
	tag := "idem-" + r.Name
	deliveries, err := ch.ConsumeWithContext(ctx, r.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return err
	}
	defer ch.Cancel(tag, false)
	p, err := consumer.New(&consumer.Options{Store: store, Group: "s36", Lease: lease, RerunAbandoned: true})
	if err != nil {
		return err
	}
	effectsTable := pgx.Identifier{r.Schema}.Sanitize() + ".effects"
	for {
		var d amqp.Delivery
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d = <-deliveries:
		}
		res, err := p.Process(ctx, r.Queue, d.MessageId, func(ctx context.Context) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `INSERT INTO `+effectsTable+` (msg_id, consumer) VALUES ($1, $2)`, d.MessageId, r.Name); err != nil {
				return err
			}
			if r.Crash == "mid-handler" && d.MessageId == r.CrashAt {
				say("crash %s mid-handler", d.MessageId)
				select {} // SIGKILLed here: the transaction never commits
			}
			hold, _ := consumer.HoldFrom(ctx)
			if err := store.CompleteTx(ctx, tx, hold, &server.Response{Status: 200}); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			consumer.MarkCompleted(ctx)
			return nil
		})
		say("result %s %v %v", d.MessageId, res, err)
		if r.Crash == "before-ack" && d.MessageId == r.CrashAt && res == consumer.Processed {
			say("crash %s before its ack", d.MessageId)
			select {} // SIGKILLed here: the broker redelivers the message
		}
		switch {
		case err == nil && (res == consumer.Processed || res == consumer.Duplicate):
			if err := d.Ack(false); err != nil {
				return err
			}
		default: // Busy, Failed, or the store could not answer: deliver it again later
			time.Sleep(50 * time.Millisecond)
			if err := d.Nack(false, true); err != nil {
				return err
			}
		}
		if done != nil && done(d.MessageId, res) {
			return nil
		}
	}
}

// effects counts the effects made so far.
func effects(t *testing.T, pool *pgxpool.Pool, schema string) int {
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT msg_id) FROM `+
		pgx.Identifier{schema}.Sanitize()+`.effects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
