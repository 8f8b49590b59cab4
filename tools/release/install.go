package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// installCheck installs the release as a user would, from a local proxy
// serving the working tree: in a new module outside the repository, with no
// go.work and no replace, it gets every published library module, builds the
// READMEs' snippets as programs, installs cmd/idem with go install …@version
// and runs it.
func (r *repo) installCheck(snips []snippet) error {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "idem-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxy, user, bin := filepath.Join(tmp, "proxy"), filepath.Join(tmp, "user"), filepath.Join(tmp, "bin")
	if err := r.writeProxy(proxy); err != nil {
		return err
	}
	env, err := installEnv(tmp, proxy, bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(user, 0o755); err != nil {
		return err
	}
	if _, err := run(user, env, "go", "mod", "init", "example.com/user"); err != nil {
		return err
	}
	get := []string{"get"}
	for _, m := range r.publishedMods() {
		if !m.command() {
			get = append(get, m.path+"@"+r.version)
		}
	}
	if _, err := run(user, env, "go", get...); err != nil {
		return fmt.Errorf("a user's go get of the release fails: %w", err)
	}
	fmt.Printf("install check: go get %s of %d modules from a local proxy, outside the workspace\n", r.version, len(get)-1)

	if err := buildSnippets(user, env, snips); err != nil {
		return err
	}
	for _, m := range r.publishedMods() {
		if m.command() {
			if err := r.installCommand(user, env, bin, m); err != nil {
				return err
			}
		}
	}
	fmt.Printf("install check: passed in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// installEnv is the environment of a user outside the repository: no
// workspace, a module cache of its own, and the local proxy first, then the
// machine's module cache and proxy for third-party modules. The release's
// modules are not in the checksum database yet, so it is not asked about them.
func installEnv(tmp, proxy, bin string) ([]string, error) {
	out, err := run(".", []string{"GOWORK=off"}, "go", "env", "GOMODCACHE", "GOPROXY")
	if err != nil {
		return nil, err
	}
	vars := strings.Split(strings.TrimSpace(out), "\n")
	if len(vars) != 2 {
		return nil, fmt.Errorf("go env GOMODCACHE GOPROXY printed %q", out)
	}
	proxies := []string{"file://" + filepath.ToSlash(proxy), "file://" + filepath.ToSlash(filepath.Join(vars[0], "cache", "download"))}
	if vars[1] != "" && vars[1] != "off" {
		proxies = append(proxies, vars[1])
	}
	// -modcacherw lets the temporary directory, module cache included, be removed.
	// GOPRIVATE and GONOPROXY are cleared: either would send the release's paths
	// past the local proxy.
	return []string{
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GONOPROXY=",
		"GOMODCACHE=" + filepath.Join(tmp, "modcache"),
		"GOPROXY=" + strings.Join(proxies, ","),
		"GONOSUMDB=" + rootPath,
		"GOPRIVATE=",
		"GOBIN=" + bin,
	}, nil
}

// buildSnippets writes each snippet as a program in the user's module, adds
// its imports with goimports, and builds and vets them all.
func buildSnippets(user string, env []string, snips []snippet) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// goimports finds a package only in a downloaded module, and go get
	// downloads only what the release's packages import, not what their tests
	// do (testify's require, which a test snippet uses).
	if _, err := run(user, env, "go", "mod", "download", "all"); err != nil {
		return err
	}
	var files []string
	for _, s := range snips {
		dir := filepath.Join(user, s.name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for name, src := range s.files() {
			f := filepath.Join(dir, name)
			if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
				return err
			}
			files = append(files, f)
		}
	}
	if _, err := run(user, env, self, append([]string{"imports"}, files...)...); err != nil {
		return fmt.Errorf("goimports on the snippet programs: %w", err)
	}
	if _, err := run(user, env, "go", "build", "./..."); err != nil {
		// goimports adds a package only if it has every name the snippet uses
		// from it, so a renamed name shows up as "undefined: pkg".
		return fmt.Errorf("a README snippet does not compile against the release (\"undefined: pkg\": a name the snippet uses from pkg is not in it): %w", err)
	}
	if _, err := run(user, env, "go", "vet", "./..."); err != nil {
		return fmt.Errorf("go vet finds a problem in a README snippet: %w", err)
	}
	fmt.Printf("install check: %d README snippets build and vet as programs\n", len(snips))
	return nil
}

// installCommand installs a command module with go install …@version, which
// refuses a go.mod with a replace, and runs it: idem version, and a short demo.
func (r *repo) installCommand(user string, env []string, bin string, m *mod) error {
	if _, err := run(user, env, "go", "install", m.path+"@"+r.version); err != nil {
		return fmt.Errorf("go install %s@%s fails: %w", m.path, r.version, err)
	}
	exe := filepath.Join(bin, filepath.Base(m.path))
	out, err := run(user, nil, exe, "version")
	if err != nil {
		return fmt.Errorf("the installed command fails: %w", err)
	}
	fmt.Printf("install check: go install %s@%s: %s\n", m.path, r.version, strings.TrimSpace(out))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	demo := exec.CommandContext(ctx, exe, "demo", "-n", "20")
	demo.Dir = user
	if out, err := demo.CombinedOutput(); err != nil {
		return &cmdError{cmd: exe + " demo -n 20", dir: user, out: string(out), err: err}
	}
	fmt.Println("install check: idem demo -n 20 exits 0")
	return nil
}
