package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// rootPath is the root module's path; every sibling's path is below it.
const rootPath = "github.com/idem-go/idem"

// published are the module directories a release tags and users install;
// commands among them are installed with go install …@version, which refuses a
// go.mod with a replace. unpublished are the repository's other modules (tests
// that need services, the benchmark, this tool): never tagged, they may keep
// replaces. A go.mod in neither list fails the check, so a new module is
// placed on purpose.
var (
	published   = []string{".", "journal/pgjournal", "server/pgstore", "server/redisstore", "idemotel", "cmd/idem"}
	commands    = []string{"cmd/idem"}
	unpublished = []string{"bench", "toxitest", "server/brokertest", "tools/release"}
)

// mod is one module of the repository.
type mod struct {
	dir  string // slash-separated, relative to the top; "." for the root
	path string
	file *modfile.File
}

func (m *mod) published() bool { return slices.Contains(published, m.dir) }
func (m *mod) command() bool   { return slices.Contains(commands, m.dir) }

// tagPrefix is the prefix of the module's release tags: "" for the root,
// "dir/" for a sub-module (the go command's convention for a multi-module repository).
func (m *mod) tagPrefix() string {
	if m.dir == "." {
		return ""
	}
	return m.dir + "/"
}

// repo is the working tree being released.
type repo struct {
	top     string
	version string // the release version: CHANGELOG.md's newest "## vX.Y.Z"
	mods    []*mod // every module, in tag order: each after the siblings it requires
	modDirs []string
}

func openRepo() (*repo, error) {
	top, err := gitTop()
	if err != nil {
		return nil, err
	}
	r := &repo{top: top}
	changelog, err := os.ReadFile(filepath.Join(top, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	vs := releasedVersions(string(changelog))
	if len(vs) == 0 {
		return nil, errors.New("CHANGELOG.md has no \"## vX.Y.Z\" heading: no version to release")
	}
	r.version = vs[len(vs)-1]
	if err := r.loadModules(); err != nil {
		return nil, err
	}
	return r, nil
}

// loadModules reads every go.mod git knows of (tracked or new, not ignored),
// outside testdata, and orders the modules for tagging.
func (r *repo) loadModules() error {
	out, err := run(r.top, nil, "git", "ls-files", "-co", "--exclude-standard")
	if err != nil {
		return err
	}
	byPath := map[string]*mod{}
	for _, f := range strings.Split(strings.TrimSpace(out), "\n") {
		if path.Base(f) != "go.mod" {
			continue
		}
		dir := path.Dir(f)
		r.modDirs = append(r.modDirs, dir)
		if slices.Contains(strings.Split(dir, "/"), "testdata") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.top, f))
		if err != nil {
			return err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return err
		}
		m := &mod{dir: dir, path: mf.Module.Mod.Path, file: mf}
		if want := path.Join(rootPath, dir); m.path != want {
			return fmt.Errorf("%s: module %s, want %s (the module path follows the directory)", f, m.path, want)
		}
		if !m.published() && !slices.Contains(unpublished, dir) {
			return fmt.Errorf("%s: a module neither published nor unpublished: add %q to one of the lists in tools/release/modules.go", f, dir)
		}
		byPath[m.path] = m
	}
	for _, dir := range published {
		if byPath[path.Join(rootPath, dir)] == nil {
			return fmt.Errorf("published module %s has no go.mod", dir)
		}
	}
	return r.orderModules(byPath)
}

// orderModules sorts the modules so that each comes after every sibling it
// requires, the order in which tags must appear on the proxy.
func (r *repo) orderModules(byPath map[string]*mod) error {
	done := map[string]bool{}
	var visit func(m *mod, seen []string) error
	visit = func(m *mod, seen []string) error {
		if done[m.path] {
			return nil
		}
		if slices.Contains(seen, m.path) {
			return fmt.Errorf("modules require each other in a cycle: %s", strings.Join(append(seen, m.path), " -> "))
		}
		for _, req := range m.file.Require {
			if dep := byPath[req.Mod.Path]; dep != nil {
				if err := visit(dep, append(seen, m.path)); err != nil {
					return err
				}
			}
		}
		done[m.path] = true
		r.mods = append(r.mods, m)
		return nil
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	// Sorted, commands last: each tag after those of the libraries.
	slices.SortFunc(paths, func(a, b string) int {
		if ca, cb := byPath[a].command(), byPath[b].command(); ca != cb {
			if ca {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, p := range paths {
		if err := visit(byPath[p], nil); err != nil {
			return err
		}
	}
	return nil
}

func (r *repo) publishedMods() []*mod {
	var ms []*mod
	for _, m := range r.mods {
		if m.published() {
			ms = append(ms, m)
		}
	}
	return ms
}

func (r *repo) publishedDirs() []string {
	var dirs []string
	for _, m := range r.publishedMods() {
		dirs = append(dirs, m.dir)
	}
	return dirs
}

// checkRequirements checks every go.mod against the release: siblings
// required at the release version, published modules requiring only published
// siblings and replacing only siblings, commands replacing nothing, and
// go.work's replaces at the release version.
func (r *repo) checkRequirements() error {
	siblings := map[string]*mod{}
	for _, m := range r.mods {
		siblings[m.path] = m
	}
	var problems []string
	for _, m := range r.mods {
		problems = append(problems, checkModFile(m, siblings, r.version)...)
	}
	problems = append(problems, r.checkWork()...)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "    "+p)
		}
		return fmt.Errorf("%d go.mod problem(s), listed above", len(problems))
	}
	return nil
}

// checkModFile returns what is wrong with one module's go.mod for a release at version.
func checkModFile(m *mod, siblings map[string]*mod, version string) []string {
	var problems []string
	where := path.Join(m.dir, "go.mod")
	for _, req := range m.file.Require {
		p, v := req.Mod.Path, req.Mod.Version
		if p != rootPath && !strings.HasPrefix(p, rootPath+"/") {
			continue
		}
		sib := siblings[p]
		switch {
		case sib == nil:
			problems = append(problems, fmt.Sprintf("%s requires %s, which is no module of this repository", where, p))
		case m.published() && !sib.published():
			problems = append(problems, fmt.Sprintf("%s requires %s, which is never published", where, p))
		case v == "v0.0.0" || module.IsPseudoVersion(v):
			problems = append(problems, fmt.Sprintf("%s requires %s %s, a version that is never tagged: require %s", where, p, v, version))
		case v != version:
			problems = append(problems, fmt.Sprintf("%s requires %s %s, not the release version %s", where, p, v, version))
		}
	}
	if !m.published() {
		return problems
	}
	for _, rep := range m.file.Replace {
		switch {
		case m.command():
			problems = append(problems, fmt.Sprintf("%s replaces %s: go install %s@%s refuses a module with a replace", where, rep.Old.Path, m.path, version))
		case siblings[rep.Old.Path] == nil || !modfile.IsDirectoryPath(rep.New.Path):
			problems = append(problems, fmt.Sprintf("%s replaces %s => %s: users ignore a replace, so a published module may only point a sibling at its directory", where, rep.Old.Path, rep.New.Path))
		}
	}
	return problems
}

// checkWork checks that go.work's replaces, which stand the checkout in for
// the siblings' release version, name that version.
func (r *repo) checkWork() []string {
	data, err := os.ReadFile(filepath.Join(r.top, "go.work"))
	if err != nil {
		return []string{err.Error()}
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, rep := range wf.Replace {
		if rep.Old.Version != r.version && (rep.Old.Path == rootPath || strings.HasPrefix(rep.Old.Path, rootPath+"/")) {
			problems = append(problems, fmt.Sprintf("go.work replaces %s %s: the siblings are required at %s", rep.Old.Path, rep.Old.Version, r.version))
		}
	}
	return problems
}

// printTags prints the tags of the release, in the order to push them.
func (r *repo) printTags() error {
	head, err := run(r.top, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	head = strings.TrimSpace(head)
	if status, _ := run(r.top, nil, "git", "status", "--porcelain"); strings.TrimSpace(status) != "" {
		fmt.Println("The work tree has uncommitted changes: the tags below name HEAD, which does not hold them.")
	}
	fmt.Printf("Tags for %s (nothing is pushed; root first, each module after the siblings it requires):\n", r.version)
	var tags []string
	for _, m := range r.publishedMods() {
		tag := m.tagPrefix() + r.version
		tags = append(tags, tag)
		fmt.Printf("git tag -a %s -m '%s %s' %s\n", tag, m.path, r.version, head)
	}
	fmt.Printf("git push origin %s\n", strings.Join(tags, " "))
	fmt.Printf("Then record the release for the next API report, from the repository's root: mkdir -p release && git rev-parse %s^{commit} > release/%s, and commit it.\n", r.version, r.version)
	return nil
}

// releasedVersions returns CHANGELOG.md's "## vX.Y.Z" headings, oldest first.
func releasedVersions(changelog string) []string {
	var vs []string
	for _, line := range strings.Split(changelog, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "## "); ok {
			v = strings.Fields(v + " ")[0]
			if semver.IsValid(v) && semver.Canonical(v) == v {
				vs = append(vs, v)
			}
		}
	}
	semver.Sort(vs)
	return vs
}

// unreleased returns the text under CHANGELOG.md's "## Unreleased" heading,
// up to the next "## " heading; "" if there is none.
func unreleased(changelog string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(line, "## ")), "Unreleased")
			continue
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
