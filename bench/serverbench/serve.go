// This file is the server child's side: ServeChild opens the stores, serves
// every row on its own path of one HTTP/1.1 listener, with pathStats beside
// them, and cleans up when the parent closes its stdin.

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
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	st, err := openStores(ctx, cc)
	if err != nil {
		return fail(err)
	}
	mux, mws, err := newMux(st, cc.CPUProfile != "")
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
	b, _ := json.Marshal(childInfo{Addr: ln.Addr().String(), RedisPrefix: st.redisPrefix, PGSchema: st.pgSchema})
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
	for _, mw := range mws {
		err = errors.Join(err, mw.Shutdown(stopCtx))
	}
	if err = errors.Join(err, st.cleanup()); err != nil {
		fmt.Fprintln(os.Stderr, "serverbench child:", err)
		return 1
	}
	return 0
}

// newMux serves every row whose store is open, each on its row's path (its
// profiler label set if label), and pathStats. It returns the middlewares
// too, to be shut down before the stores are cleaned up.
func newMux(st *stores, label bool) (*http.ServeMux, []*server.Middleware, error) {
	var mws []*server.Middleware
	idem := func(s server.Store) (http.Handler, error) {
		mw, err := server.New(&server.Options{Store: s})
		if err != nil {
			return nil, err
		}
		mws = append(mws, mw)
		return mw.Wrap(bare{}), nil
	}
	handlers := map[string]http.Handler{"bare": bare{}, "floor mem": newMemFloor(bare{}),
		"contract floor mem": newMemContractFloor(bare{}, server.DefaultLease, server.DefaultTTL)}
	var err error
	if handlers["idem mem"], err = idem(memstore.New(nil)); err != nil {
		return nil, nil, err
	}
	if st.redisStore != nil {
		if handlers["idem redis"], err = idem(st.redisStore); err != nil {
			return nil, nil, err
		}
		handlers["floor redis"] = newRedisFloor(bare{}, st.rdb, st.redisPrefix+"floor:", server.DefaultTTL)
		handlers["contract floor redis"] = newRedisContractFloor(bare{}, st.rdb, st.redisPrefix+"contract:", server.DefaultLease, server.DefaultTTL)
	}
	if st.pgStore != nil {
		if handlers["idem pg"], err = idem(st.pgStore); err != nil {
			return nil, nil, err
		}
		handlers["floor pg"] = newPGFloor(bare{}, st.pool, st.pgSchema, server.DefaultTTL)
		handlers["contract floor pg"] = newPGContractFloor(bare{}, st.pool, st.pgSchema, server.DefaultLease, server.DefaultTTL)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pathStats, serveStats)
	for _, r := range allRows {
		h := handlers[r.name]
		switch {
		case h == nil:
		case label:
			mux.Handle(r.path, labelled(r.name, h))
		default:
			mux.Handle(r.path, h)
		}
	}
	return mux, mws, nil
}
