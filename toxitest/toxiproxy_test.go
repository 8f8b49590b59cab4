// toxiproxy_test.go builds the toxiproxy server once, starts one server
// process per test case, and wraps the calls the chaos tests make to its API
// (through toxiproxy's own Go client) in a watchdog.

package toxitest_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// toxiproxyPkg is the server's main package; go.mod names it in a tool
// directive, so go mod tidy keeps what it needs to build.
const toxiproxyPkg = "github.com/Shopify/toxiproxy/v2/cmd/server"

// apiTimeout bounds one call to toxiproxy's API. toxiproxy v2.5.0 can wedge
// its API for good when a toxic changes while a connection's writer has died
// with data still queued (Shopify/toxiproxy#558): a call that takes longer
// than this is taken as such a wedge.
const apiTimeout = 5 * time.Second

// toxiproxyBin is the server binary TestMain built.
var toxiproxyBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toxitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "toxitest:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	toxiproxyBin = filepath.Join(dir, "toxiproxy-server")
	build := exec.Command("go", "build", "-o", toxiproxyBin, toxiproxyPkg)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "toxitest: go build %s: %v\n%s", toxiproxyPkg, err, out)
		return 1
	}
	return m.Run()
}

// toxiServer is one running toxiproxy server process.
type toxiServer struct {
	client *toxiproxy.Client
	log    string // its stdout and stderr
	exited chan struct{}
	kill   func()
}

// startToxiproxy starts a toxiproxy server with its API on a free loopback
// port; it is killed when t ends. toxiproxy takes a fixed port, not 0, so the
// port is picked by listening on port 0 and closing; if another process takes
// it in between, the server exits and another port is tried.
func startToxiproxy(t testing.TB) *toxiServer {
	t.Helper()
	var lastErr error
	for try := range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(t.TempDir(), fmt.Sprintf("toxiproxy-%d.log", try))
		s, err := startServer(port, logPath)
		if err == nil {
			t.Cleanup(s.kill)
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

func startServer(port int, logPath string) (*toxiServer, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(toxiproxyBin, "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-seed", "1")
	cmd.Env = append(os.Environ(), "LOG_LEVEL=error")
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	s := &toxiServer{
		client: toxiproxy.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))),
		log:    logPath,
		exited: make(chan struct{}),
	}
	go func() {
		cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	s.kill = func() {
		cmd.Process.Kill()
		<-s.exited
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.client.Proxies(); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("toxiproxy server on port %d exited: %s", port, s.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, errors.New("toxiproxy server did not answer within 10s")
		}
	}
}

// output returns the server's log, trimmed to its last 2 KiB.
func (s *toxiServer) output() string {
	out, _ := os.ReadFile(s.log)
	out = bytes.TrimSpace(out)
	if len(out) > 2048 {
		out = out[len(out)-2048:]
	}
	return string(out)
}

// call runs one API call with the watchdog. errWedged means it did not
// return within apiTimeout; the server must then be killed.
func (s *toxiServer) call(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-s.exited:
		return fmt.Errorf("toxiproxy server exited: %s", s.output())
	case <-time.After(apiTimeout):
		return errWedged
	}
}

var errWedged = fmt.Errorf("toxiproxy API did not answer within %v (Shopify/toxiproxy#558)", apiTimeout)

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// newProxy creates a proxy named name from listen ("host:port"; port 0 picks
// one) to upstream.
func (s *toxiServer) newProxy(t testing.TB, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	var p *toxiproxy.Proxy
	err := s.call(func() (err error) {
		p, err = s.client.CreateProxy(name, listen, upstream)
		return err
	})
	if err != nil {
		t.Fatalf("create proxy %s: %v", name, err)
	}
	return p
}
