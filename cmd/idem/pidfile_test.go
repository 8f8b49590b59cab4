package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// -pidfile never takes over the file of a server still running, and at
// exit removes only a file that still holds this process's ID.
func TestPidfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.pid")
	parent := strconv.Itoa(os.Getppid()) // a live process that is not this one
	if err := os.WriteFile(path, []byte(parent+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writePidfile(path); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a pid file naming a live process: %v, want a refusal", err)
	}
	if data, _ := os.ReadFile(path); string(data) != parent+"\n" {
		t.Fatalf("the refused pid file now holds %q", data)
	}

	if err := os.WriteFile(path, []byte("999999999\n"), 0o644); err != nil { // no such process
		t.Fatal(err)
	}
	remove, err := writePidfile(path)
	if err != nil {
		t.Fatalf("a stale pid file: %v, want it taken over", err)
	}
	if err := os.WriteFile(path, []byte(parent+"\n"), 0o644); err != nil { // another server took it since
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("remove deleted a pid file that no longer named this process: %v", err)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("remove left this process's pid file: %v", err)
	}
}
