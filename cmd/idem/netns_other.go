//go:build !linux

// This file stands in for netns.go and nemesis_net.go where network namespaces do not
// exist: "idem chaos -netns" says so, and nothing else of it runs.

package main

import (
	"context"
	"errors"
	"net"
	"os/exec"

	"github.com/idem-go/idem/testserver"
)

// chaosNet is never made here.
type chaosNet struct{}

func newChaosNet(workers, servers int) (*chaosNet, error) {
	return nil, errors.New("-netns: cannot make network namespaces here: they are Linux's")
}

func (cn *chaosNet) describe() string { return "" }
func (cn *chaosNet) Close() error     { return nil }
func (cn *chaosNet) healAll() error   { return nil }
func (cn *chaosNet) listenServer(int, *testserver.Options) (*testserver.Server, error) {
	return nil, errors.ErrUnsupported
}
func (cn *chaosNet) proxyListener() (net.Listener, error) { return nil, errors.ErrUnsupported }
func (cn *chaosNet) proxyDial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.ErrUnsupported
}
func (cn *chaosNet) storeLink(string) (*storeLink, error) { return nil, errors.ErrUnsupported }
func (cn *chaosNet) serverDial(int) func(context.Context, string, string) (net.Conn, error) {
	return cn.proxyDial
}
func (cn *chaosNet) workerCommand(ctx context.Context, _ int, exe string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, exe, args...)
}
func (cn *chaosNet) serverLinks() []struct{}                      { return nil }
func (cn *chaosNet) fleetLinks() []struct{}                       { return nil }
func (cn *chaosNet) planNet(uint64, int, []struct{}) []*linkFault { return nil }
