// This file is the server child's side: ServeChild opens the store of its one
// row, serves the row on its path of an HTTP/1.1 listener, with pathStats
// beside it, and cleans up when the parent closes its stdin. A child per row,
// as a service runs one middleware, keeps each row's heap, allocator and
// collections its own: rows sharing one measured otherwise (bench/LOG.md).

package serverbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
	"github.com/idem-go/idem/server"
	"github.com/idem-go/idem/server/memstore"
	"github.com/idem-go/idem/server/pgstore"
	"github.com/idem-go/idem/server/redisstore"
)

// ServeChild runs the server child until its stdin closes and returns its
// exit code: 0 once it has stopped and cleaned up, 1 on any failure (written
// to stderr, or, before it served, as childInfo.Error on stdout).
func ServeChild() int {
	// An interrupt at the terminal reaches the whole process group: the
	// child leaves it to the parent, which stops it by closing its stdin, so
	// that the run's keys and schema are still cleaned up.
	signal.Ignore(os.Interrupt)
	fail := func(err error) int {
		b, _ := json.Marshal(childInfo{Error: err.Error()})
		fmt.Printf("%s\n", b)
		return 1
	}
	if len(os.Args) < 3 {
		return fail(errors.New("no configuration argument"))
	}
	var cc childConfig
	if err := json.Unmarshal([]byte(os.Args[2]), &cc); err != nil {
		return fail(fmt.Errorf("configuration %q: %w", os.Args[2], err))
	}
	// Its own start ends before the parent's wait for it does, so that a store
	// that hangs is given up here, and what was made is cleaned up, before the
	// parent kills the child.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout-15*time.Second)
	defer cancel()
	st, err := openStores(ctx, cc)
	if err != nil {
		return fail(err)
	}
	mux, mw, err := newMux(ctx, st, cc.Row)
	if err != nil {
		return fail(errors.Join(err, st.cleanup()))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(errors.Join(err, st.cleanup()))
	}
	stopProfile, err := harness.CPUProfile(cc.CPUProfile)
	if err != nil {
		ln.Close()
		return fail(errors.Join(err, st.cleanup()))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	b, _ := json.Marshal(childInfo{Addr: ln.Addr().String()})
	fmt.Printf("%s\n", b)

	stdin := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case <-stdin:
	case err := <-served:
		fmt.Fprintln(os.Stderr, "serverbench child:", err)
	}
	stopCtx, stop := context.WithTimeout(context.Background(), stopTimeout-10*time.Second)
	defer stop()
	err = errors.Join(srv.Shutdown(stopCtx), stopProfile())
	if mw != nil {
		err = errors.Join(err, mw.Shutdown(stopCtx))
	}
	if err = errors.Join(err, st.cleanup()); err != nil {
		fmt.Fprintln(os.Stderr, "serverbench child:", err)
		return 1
	}
	return 0
}

// newMux serves the row named name over st on its path, and pathStats. It
// returns the row's Middleware too, if it has one, to be shut down before the
// stores are cleaned up.
func newMux(ctx context.Context, st *stores, name string) (*http.ServeMux, *server.Middleware, error) {
	i := rowIndex(allRows, name)
	switch {
	case i < 0:
		return nil, nil, fmt.Errorf("no row %q", name)
	case allRows[i].store == "redis" && st.rdb == nil:
		return nil, nil, fmt.Errorf("row %q: no Redis address", name)
	case allRows[i].store == "pg" && st.pool == nil:
		return nil, nil, fmt.Errorf("row %q: no PostgreSQL URL", name)
	}
	h, mw, err := rowHandler(ctx, st, name)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pathStats, serveStats)
	mux.Handle(allRows[i].path, h)
	return mux, mw, nil
}

// rowHandler returns the handler of the row named name, making its store on
// st's clients (which the row's store needs), and its Middleware if the row
// is idem's.
func rowHandler(ctx context.Context, st *stores, name string) (http.Handler, *server.Middleware, error) {
	idem := func(s server.Store) (http.Handler, *server.Middleware, error) {
		mw, err := server.New(&server.Options{Store: s})
		if err != nil {
			return nil, nil, err
		}
		return mw.Wrap(bare{}), mw, nil
	}
	switch name {
	case "bare":
		return bare{}, nil, nil
	case "idem mem":
		return idem(memstore.New(nil))
	case "floor mem":
		return newMemFloor(bare{}), nil, nil
	case "contract floor mem":
		return newMemContractFloor(bare{}, server.DefaultLease, server.DefaultTTL), nil, nil
	case "idem redis":
		s, err := redisstore.Open(ctx, st.rdb, &redisstore.Options{Prefix: st.redisPrefix})
		if err != nil {
			return nil, nil, err
		}
		return idem(s)
	case "floor redis":
		return newRedisFloor(bare{}, st.rdb, st.redisPrefix, server.DefaultTTL), nil, nil
	case "contract floor redis":
		return newRedisContractFloor(bare{}, st.rdb, st.redisPrefix, server.DefaultLease, server.DefaultTTL), nil, nil
	case "idem pg":
		s, err := pgstore.Open(ctx, st.pool, &pgstore.Options{Schema: st.pgSchema})
		if err != nil {
			return nil, nil, err
		}
		st.pgStore = s
		return idem(s)
	case "floor pg":
		if err := createPGFloor(ctx, st.pool, st.pgSchema); err != nil {
			return nil, nil, err
		}
		return newPGFloor(bare{}, st.pool, st.pgSchema, server.DefaultTTL), nil, nil
	case "contract floor pg":
		if err := createPGContractFloor(ctx, st.pool, st.pgSchema); err != nil {
			return nil, nil, err
		}
		return newPGContractFloor(bare{}, st.pool, st.pgSchema, server.DefaultLease, server.DefaultTTL), nil, nil
	}
	return nil, nil, fmt.Errorf("no handler for row %q", name)
}
