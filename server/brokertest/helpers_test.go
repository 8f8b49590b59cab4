package brokertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idem-go/idem/internal/pgtest"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestMain runs a consumer process when the test binary is re-executed as one.
func TestMain(m *testing.M) {
	if cfg := os.Getenv("IDEM_S36_CHILD"); cfg != "" {
		os.Exit(runChild(cfg))
	}
	os.Exit(m.Run())
}

// runChild consumes as run says until it is killed at its crash point.
func runChild(cfg string) int {
	var r run
	if err := json.Unmarshal([]byte(cfg), &r); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	store, err := pgstore.Open(ctx, pool, &pgstore.Options{Schema: r.Schema})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	ch, err := conn.Channel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	err = consume(ctx, ch, r, pool, store, say, nil)
	fmt.Fprintln(os.Stderr, "child: consume returned:", err)
	return 1
}

func amqpURL() string {
	if u := os.Getenv("IDEM_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// testDatabase connects to PostgreSQL and makes a schema for the test, with the effects
// table the handlers write, dropped when the test ends.
func testDatabase(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Connect(t, pgtest.URL(), pgxpool.New, (*pgxpool.Pool).Ping, (*pgxpool.Pool).Close)
	schema := pgtest.Schema(t, "idem_s36_", pool.Exec)
	id := pgtest.QuoteIdent(schema)
	if _, err := pool.Exec(context.Background(), `CREATE SCHEMA `+id+`; CREATE TABLE `+id+`.effects (msg_id text NOT NULL, consumer text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool, schema
}

// testChannel connects to RabbitMQ.
func testChannel(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.DialConfig(amqpURL(), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		pgtest.Unavailable(t, "RabbitMQ at "+amqpURL()+" (set IDEM_AMQP_URL)", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
