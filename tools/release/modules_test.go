package main

import (
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// testMods builds the repository's modules from go.mod texts, by directory.
func testMods(t *testing.T, texts map[string]string) map[string]*mod {
	t.Helper()
	siblings := map[string]*mod{}
	for dir, text := range texts {
		mf, err := modfile.Parse(dir+"/go.mod", []byte(text), nil)
		if err != nil {
			t.Fatal(err)
		}
		siblings[mf.Module.Mod.Path] = &mod{dir: dir, path: mf.Module.Mod.Path, file: mf}
	}
	return siblings
}

func TestCheckModFile(t *testing.T) {
	const root = "module github.com/idem-go/idem\n"
	for _, tc := range []struct {
		name, dir, text, want string
	}{
		{"released", "server/redisstore", "module github.com/idem-go/idem/server/redisstore\nrequire github.com/idem-go/idem v0.1.0\nreplace github.com/idem-go/idem => ../..\n", ""},
		{"v0.0.0", "server/redisstore", "module github.com/idem-go/idem/server/redisstore\nrequire github.com/idem-go/idem v0.0.0\n", "never tagged"},
		{"pseudo-version", "idemotel", "module github.com/idem-go/idem/idemotel\nrequire github.com/idem-go/idem v0.0.0-00010101000000-000000000000\n", "never tagged"},
		{"another version", "server/redisstore", "module github.com/idem-go/idem/server/redisstore\nrequire github.com/idem-go/idem v0.1.1\n", "not the release version v0.1.0"},
		{"replace in a command", "cmd/idem", "module github.com/idem-go/idem/cmd/idem\nrequire github.com/idem-go/idem v0.1.0\nreplace github.com/idem-go/idem => ../..\n", "refuses a module with a replace"},
		{"third-party replace", "idemotel", "module github.com/idem-go/idem/idemotel\nrequire github.com/idem-go/idem v0.1.0\nreplace go.opentelemetry.io/otel => ../otel\n", "users ignore a replace"},
		{"unpublished sibling", "cmd/idem", "module github.com/idem-go/idem/cmd/idem\nrequire github.com/idem-go/idem/toxitest v0.1.0\n", "never published"},
		{"unpublished may replace", "bench", "module github.com/idem-go/idem/bench\nrequire github.com/idem-go/idem v0.1.0\nreplace github.com/idem-go/idem => ../\n", ""},
		{"unpublished at v0.0.0", "bench", "module github.com/idem-go/idem/bench\nrequire github.com/idem-go/idem v0.0.0\n", "never tagged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := testMods(t, map[string]string{".": root, "toxitest": "module github.com/idem-go/idem/toxitest\n", tc.dir: tc.text})
			problems := checkModFile(mods["github.com/idem-go/idem/"+tc.dir], mods, "v0.1.0")
			got := strings.Join(problems, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("problems = %q, want one containing %q", got, tc.want)
			}
		})
	}
}
