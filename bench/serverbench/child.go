// This file starts and stops the server child from the parent's side. The
// child is this binary re-executed (harness.StartChild) with the hidden
// first argument childArg and its childConfig as JSON; it answers with one
// JSON line (childInfo) on stdout, and stops, cleaning up its keys and
// schema, when its stdin closes.

package serverbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/idem-go/idem/bench/internal/harness"
)

const childArg = "-serverbench-child"

// startTimeout bounds the child's start: opening the stores includes
// pgstore's migration.
const startTimeout = time.Minute

// stopTimeout bounds the child's clean-up after its stdin closed: deleting
// the run's Redis keys and dropping its schema.
const stopTimeout = 2 * time.Minute

// IsChild reports whether this process was started as the server child; the
// bench's main (and its TestMain) call it before parsing flags and then run
// ServeChild instead.
func IsChild() bool { return len(os.Args) > 1 && os.Args[1] == childArg }

// childInfo is the child's first line on stdout.
type childInfo struct {
	Addr  string `json:"addr,omitempty"`  // 127.0.0.1:port
	Error string `json:"error,omitempty"` // why the child could not start
}

// child is a running server child.
type child struct {
	*harness.Child
	cc   childConfig
	info childInfo
}

func startChild(ctx context.Context, cc childConfig) (*child, error) {
	arg, err := json.Marshal(cc)
	if err != nil {
		return nil, err
	}
	hc, line, err := harness.StartChild(ctx, startTimeout, childArg, string(arg))
	if err != nil {
		return nil, fmt.Errorf("serverbench: the server child of %s: %w", cc.Row, err)
	}
	c := &child{Child: hc, cc: cc}
	switch err := json.Unmarshal(line, &c.info); {
	case err != nil || c.info.Error == "" && c.info.Addr == "":
		c.stop()
		return nil, fmt.Errorf("serverbench: the server child of %s printed %q, want its address as JSON", cc.Row, line)
	case c.info.Error != "":
		c.stop()
		return nil, fmt.Errorf("serverbench: the server child of %s: %s", cc.Row, c.info.Error)
	}
	return c, nil
}

func (c *child) url(path string) string { return "http://" + c.info.Addr + path }

// stop asks the child to exit by closing its stdin and waits for it to clean
// up, killing it after stopTimeout. It returns the child's failure, if any;
// calling it again returns the same.
func (c *child) stop() error {
	if err := c.Stop(stopTimeout); err != nil {
		return fmt.Errorf("serverbench: the server child of %s: %w", c.cc.Row, err)
	}
	return nil
}
