// Command release checks that idem's modules can be released and installed as
// a Go user installs them, and reports their API changes since the last
// release. docs/releasing.md describes the process it belongs to.
//
// Usage, from tools/release (a module of its own, outside go.work):
//
//	GOWORK=off go run . check   # go.mod requirements, README snippets, install from a local proxy, the tags
//	GOWORK=off go run . api     # API changes since the last release, against CHANGELOG.md
//
// Either prints one line starting "release: FAIL:" and exits 1 when a check fails.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "check":
		err = runCheck()
	case "api":
		err = runAPI()
	case "imports":
		// Internal: the install check runs goimports on a snippet program in
		// the user's module, with that module's environment.
		for _, f := range os.Args[2:] {
			if err = fixImports(f); err != nil {
				break
			}
		}
	default:
		usage()
	}
	if err != nil {
		var ce *cmdError
		if errors.As(err, &ce) && ce.out != "" {
			fmt.Fprintln(os.Stderr, tail(ce.out, 40))
		}
		fmt.Fprintf(os.Stderr, "release: FAIL: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release check | release api")
	os.Exit(2)
}

// runCheck runs the release check: requirements, snippets, the install from a
// local proxy, then the tags to push.
func runCheck() error {
	repo, err := openRepo()
	if err != nil {
		return err
	}
	fmt.Printf("release %s: modules %s\n", repo.version, strings.Join(repo.publishedDirs(), ", "))
	if err := repo.checkRequirements(); err != nil {
		return err
	}
	fmt.Println("go.mod files: siblings required at", repo.version, "and cmd/idem has no replace")
	snips, err := repo.snippets()
	if err != nil {
		return err
	}
	if err := repo.installCheck(snips); err != nil {
		return err
	}
	return repo.printTags()
}

// runAPI prints the API changes of the published modules since the last
// release and fails on an incompatible one CHANGELOG.md does not name.
func runAPI() error {
	repo, err := openRepo()
	if err != nil {
		return err
	}
	return repo.apiReport(os.Stdout)
}

// cmdError is a command that failed; main prints its output before the one
// line that says what failed.
type cmdError struct {
	cmd, dir, out string
	err           error
}

func (e *cmdError) Error() string { return fmt.Sprintf("%s (in %s): %v", e.cmd, e.dir, e.err) }

// run runs a command in dir with env added to this process's environment and
// returns its combined output.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), &cmdError{cmd: name + " " + strings.Join(args, " "), dir: dir, out: string(out), err: err}
	}
	return string(out), nil
}

// tail returns the last n lines of s, indented, for an error message.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// gitTop returns the repository's top directory, found from the working directory.
func gitTop() (string, error) {
	out, err := run(".", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", errors.New("not inside the idem repository (git rev-parse --show-toplevel failed)")
	}
	return filepath.Clean(strings.TrimSpace(out)), nil
}
