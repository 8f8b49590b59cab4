package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// writeProxy writes a module proxy in the GOPROXY file layout under dir
// (<escaped path>/@v/list, .info, .mod, .zip) serving every published module
// of the working tree at the release version, as the tags would publish them.
func (r *repo) writeProxy(dir string) error {
	when, err := run(r.top, nil, "git", "log", "-1", "--format=%cI")
	if err != nil {
		return err
	}
	stamp, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return err
	}
	files, err := r.moduleFiles()
	if err != nil {
		return err
	}
	for _, m := range r.publishedMods() {
		if err := r.writeProxyModule(dir, m, files[m.dir], stamp); err != nil {
			return fmt.Errorf("local proxy, %s: %w", m.path, err)
		}
	}
	return nil
}

func (r *repo) writeProxyModule(dir string, m *mod, files []zip.File, stamp time.Time) error {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, r.version)
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{r.version, stamp.UTC()})
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(r.top, m.dir, "go.mod"))
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"list": []byte(r.version + "\n"), r.version + ".info": info, r.version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	z, err := os.Create(base + ".zip")
	if err != nil {
		return err
	}
	if err := zip.Create(z, module.Version{Path: m.path, Version: r.version}, files); err != nil {
		z.Close()
		return err
	}
	return z.Close()
}

// moduleFiles returns, for each published module directory, the files of the
// working tree that belong to it: what git tracks or would track (ignored build
// output left out), without the files of any module nested inside it.
func (r *repo) moduleFiles() (map[string][]zip.File, error) {
	out, err := run(r.top, nil, "git", "ls-files", "-co", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	files := map[string][]zip.File{}
	for _, f := range strings.Split(strings.TrimSpace(out), "\n") {
		owner := r.owner(f)
		if owner == "" {
			continue
		}
		abs := filepath.Join(r.top, filepath.FromSlash(f))
		if fi, err := os.Lstat(abs); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink (module zips hold neither)
		}
		rel := f
		if owner != "." {
			rel = strings.TrimPrefix(f, owner+"/")
		}
		files[owner] = append(files[owner], diskFile{rel: rel, abs: abs})
	}
	return files, nil
}

// owner returns the directory of the published module a file belongs to: the
// innermost directory with a go.mod above it; "" if that module is unpublished.
func (r *repo) owner(file string) string {
	best := "."
	for _, d := range r.modDirs {
		if d != "." && strings.HasPrefix(file, d+"/") && len(d) > len(best) {
			best = d
		}
	}
	for _, m := range r.publishedMods() {
		if m.dir == best {
			return best
		}
	}
	return ""
}

// diskFile is a working-tree file as golang.org/x/mod/zip wants it.
type diskFile struct{ rel, abs string }

func (f diskFile) Path() string                 { return path.Clean(f.rel) }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }
