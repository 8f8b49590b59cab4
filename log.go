// This file holds the structured logging helpers. Logging is silent unless
// Options.Logger is set; records carry keys and operation IDs, never bodies or
// header values.

package idem

import (
	"context"
	"log/slog"
	"time"
)

func (t *Transport) logf(msg string, o *op, args ...any) {
	if t.cfg.Logger == nil {
		return
	}
	attrs := []any{"method", o.req.Method, "url", o.req.URL.Redacted()}
	if o.key != "" {
		attrs = append(attrs, "key", o.key)
	}
	if o.rec != nil && o.rec.OperationID != "" {
		attrs = append(attrs, "op", o.rec.OperationID)
	}
	t.cfg.Logger.Log(context.Background(), slog.LevelInfo, msg, append(attrs, args...)...)
}

func (t *Transport) logRetry(o *op, attempt int, class Class, last outcome, wait time.Duration) {
	t.logf("idem: retrying", o, "attempt", attempt, "class", class.String(),
		"status", last.status, "err", last.err, "wait", wait)
}
