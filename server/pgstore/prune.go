// prune.go deletes expired rows: Prune, in batches, and the Store's background loop that
// calls it every Options.PruneEvery. An expired row already counts as absent to every
// method (and a Claim deletes the one in its way), so pruning only bounds the table.

package pgstore

import (
	"context"
	"fmt"
	"time"
)

// Prune deletes the released tokens past their time (one statement), then every expired
// row, Options.PruneBatch at a time (one DELETE each, oldest
// first, skipping rows another transaction has locked), and returns how many it deleted.
// It stops early, with ctx's error, when ctx ends. Several instances may prune at once.
func (s *Store) Prune(ctx context.Context) (int64, error) {
	if _, err := s.pool.Exec(ctx, s.q.pruneReleased); err != nil {
		return 0, fmt.Errorf("pgstore: prune: %w", err)
	}
	var n int64
	for {
		tag, err := s.pool.Exec(ctx, s.q.prune, s.opts.PruneBatch)
		if err != nil {
			return n, fmt.Errorf("pgstore: prune: %w", err)
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.opts.PruneBatch) {
			return n, nil
		}
	}
}

// pruneLoop prunes every PruneEvery until Close.
func (s *Store) pruneLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.PruneEvery)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if _, err := s.Prune(ctx); err != nil && ctx.Err() == nil && s.opts.Logger != nil {
			s.opts.Logger.Warn("pgstore: pruning expired records failed; trying again later", "err", err)
		}
	}
}
