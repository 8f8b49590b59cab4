package toxitest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestChaosCommandThroughToxiproxy runs `idem chaos` at its defaults (2,000
// payments, 32 at a time, 30 SIGKILLs of the worker, the mixed fault plan)
// with every payment going through toxiproxy, latency with jitter, slicing,
// resets and data limits switched on. It takes minutes, so it runs only with
// IDEM_TOXI_CHAOS=1:
//
//	cd toxitest && IDEM_TOXI_CHAOS=1 go test -run ChaosCommand -v -timeout 20m .
func TestChaosCommandThroughToxiproxy(t *testing.T) {
	if os.Getenv("IDEM_TOXI_CHAOS") == "" {
		t.Skip("long: set IDEM_TOXI_CHAOS=1")
	}
	bin := filepath.Join(t.TempDir(), "idem")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/idem-go/idem/cmd/idem").CombinedOutput(); err != nil {
		t.Fatalf("go build idem: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	serverAddr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	n := &tally{}
	cp := newChaosProxy(t, "chaos_command", serverAddr, n)
	// Fewer connections are hit than in TestExactlyOnceUnderToxics: 2,000
	// payments must finish in the command's budget.
	var toxics []toxic
	for _, x := range []toxic{resetUp, resetDown, latencyUp, latencyDown, slicerUp, limitUp, limitDown} {
		x.Toxicity = min(x.Toxicity, 0.1)
		toxics = append(toxics, x)
	}
	cp.add(t, toxics)

	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "chaos", "-server-addr", serverAddr, "-via", cp.listen).CombinedOutput()
	t.Logf("idem chaos through toxiproxy (%v):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("idem chaos: %v", err)
	}
	for _, want := range []string{`SIGKILLs of the sending process\s+30\b`, `made twice or more \(charged again\)\s+0\b`,
		`never made\s+0\b`, `payments to make\s+2000\b`, `2000/2000 payments made exactly once`} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("output lacks %q", want)
		}
	}
}
