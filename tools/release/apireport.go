package main

import (
	"fmt"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"
)

// The API report compares the exported API of every published module with the
// last release. The base is the newest file release/vX.Y.Z, which holds the
// commit the release was tagged at (written after tagging, so a clone without
// tags still finds it); its tree is taken with git archive. Each incompatible
// change must be named under CHANGELOG.md's "## Unreleased" by its
// package-qualified name: "idem.Options" for any change to Options or its
// fields and methods, "server.New" for a function, or the import path of a
// removed package.

// apiReport prints the changes and fails on an incompatible one the changelog
// does not name.
func (r *repo) apiReport(w io.Writer) error {
	version, commit, err := r.lastRelease()
	if err != nil {
		return err
	}
	if version == "" {
		fmt.Fprintln(w, "API report: no release recorded under release/ yet; nothing to compare against")
		return nil
	}
	if _, err := run(r.top, nil, "git", "cat-file", "-e", commit+"^{commit}"); err != nil {
		return fmt.Errorf("API report: the commit of %s (release/%s: %s) is not in this clone; fetch it (git fetch --unshallow)", version, version, commit)
	}
	old, err := os.MkdirTemp("", "idem-api-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(old)
	archive := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", commit, old)
	archive.Dir = r.top
	if out, err := archive.CombinedOutput(); err != nil {
		return &cmdError{cmd: "git archive " + commit, dir: r.top, out: string(out), err: err}
	}
	changelog, err := os.ReadFile(filepath.Join(r.top, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	var missing []string
	for _, m := range r.publishedMods() {
		before, err := loadAPI(old, m.dir)
		if err != nil {
			return err
		}
		after, err := loadAPI(r.top, m.dir)
		if err != nil {
			return err
		}
		changes := compareAPI(before, after)
		fmt.Fprintf(w, "API report: %s since %s: %d change(s)\n", m.path, version, len(changes))
		for _, c := range changes {
			fmt.Fprintf(w, "    %s\n", c)
		}
		missing = append(missing, unnamed(changes, unreleased(string(changelog)))...)
	}
	if len(missing) > 0 {
		return fmt.Errorf("API report: incompatible change(s) CHANGELOG.md's \"## Unreleased\" does not name: %s", strings.Join(missing, ", "))
	}
	return nil
}

// lastRelease returns the newest release recorded under release/ and its
// commit; "" if there is none.
func (r *repo) lastRelease() (version, commit string, err error) {
	entries, err := os.ReadDir(filepath.Join(r.top, "release"))
	if os.IsNotExist(err) {
		return "", "", nil
	} else if err != nil {
		return "", "", err
	}
	for _, e := range entries {
		if v := e.Name(); semver.IsValid(v) && (version == "" || semver.Compare(v, version) > 0) {
			version = v
		}
	}
	if version == "" {
		return "", "", nil
	}
	data, err := os.ReadFile(filepath.Join(r.top, "release", version))
	if err != nil {
		return "", "", err
	}
	commit = strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(commit) {
		return "", "", fmt.Errorf("release/%s holds %q, not a commit hash", version, commit)
	}
	return version, commit, nil
}

// loadAPI type-checks the packages of the module in dir below the tree top,
// through the tree's own go.work, leaving out commands and internal packages.
// A module the tree does not have yet has no API.
func loadAPI(top, dir string) (map[string]*types.Package, error) {
	if _, err := os.Stat(filepath.Join(top, dir, "go.mod")); os.IsNotExist(err) {
		return nil, nil
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes,
		Dir:  filepath.Join(top, dir),
		Env:  append(os.Environ(), "GOWORK="+filepath.Join(top, "go.work"), "GOFLAGS="),
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, fmt.Errorf("API report: loading %s: %v", filepath.Join(top, dir), err)
	}
	api := map[string]*types.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("API report: %s: %v", p.PkgPath, p.Errors[0])
		}
		elems := strings.Split(p.PkgPath, "/")
		if p.Name == "main" || slices.Contains(elems, "internal") || slices.Contains(elems, "testdata") {
			continue
		}
		api[p.PkgPath] = p.Types
	}
	return api, nil
}

// change is one API change of one package.
type change struct {
	pkg        string // the package's name, or its import path when it was added or removed
	message    string // apidiff's, relative to the package: "Options.Journal: removed"
	compatible bool
}

func (c change) String() string {
	kind := "incompatible"
	if c.compatible {
		kind = "compatible"
	}
	return fmt.Sprintf("%s: %s: %s", kind, c.pkg, c.message)
}

// compareAPI returns the changes between two versions of a module's packages,
// by import path.
func compareAPI(before, after map[string]*types.Package) []change {
	var changes []change
	paths := slices.Sorted(func(yield func(string) bool) {
		for p := range before {
			yield(p)
		}
		for p := range after {
			if before[p] == nil {
				yield(p)
			}
		}
	})
	for _, p := range paths {
		old, cur := before[p], after[p]
		switch {
		case cur == nil:
			changes = append(changes, change{pkg: p, message: "package removed"})
		case old == nil:
			changes = append(changes, change{pkg: p, message: "package added", compatible: true})
		default:
			for _, c := range apidiff.Changes(old, cur).Changes {
				changes = append(changes, change{pkg: cur.Name(), message: c.Message, compatible: c.Compatible})
			}
		}
	}
	return changes
}

// qualifiedName is the name an incompatible change must be listed by: the
// package's name and the changed top-level identifier ("idem.Options" for
// "(*Options).Check: removed"), or the import path of a removed package.
func (c change) qualifiedName() string {
	if c.message == "package removed" {
		return c.pkg
	}
	obj, _, _ := strings.Cut(c.message, ":")
	obj = strings.TrimLeft(obj, "(*")
	if i := strings.IndexAny(obj, ".),["); i >= 0 {
		obj = obj[:i]
	}
	return c.pkg + "." + obj
}

// unnamed returns the qualified names of the incompatible changes that the
// unreleased section of the changelog does not mention as a whole name.
func unnamed(changes []change, section string) []string {
	var missing []string
	for _, c := range changes {
		if c.compatible {
			continue
		}
		name := c.qualifiedName()
		named := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(name) + `($|[^\w])`)
		if !named.MatchString(section) && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	return missing
}
