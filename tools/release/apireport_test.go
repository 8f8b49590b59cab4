package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"testing"
)

// checkFixture type-checks the one-file package in testdata/apidiff/dir.
func checkFixture(t *testing.T, dir string) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("testdata", "apidiff", dir, "shop.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := new(types.Config).Check("example.com/shop", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

func fixtureChanges(t *testing.T) []change {
	before := map[string]*types.Package{"example.com/shop": checkFixture(t, "old")}
	after := map[string]*types.Package{"example.com/shop": checkFixture(t, "new")}
	return compareAPI(before, after)
}

func TestUnnamedIncompatibleChangeFails(t *testing.T) {
	changes := fixtureChanges(t)
	want := []string{"shop.Charge", "shop.Options", "shop.Refund"}
	got := unnamed(changes, "- shop.ChargeAll, a longer name, does not count\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("unnamed = %q, want %q (changes: %v)", got, want, changes)
	}
	var compatible int
	for _, c := range changes {
		if c.compatible {
			compatible++
		}
	}
	if compatible == 0 {
		t.Errorf("the added field Options.Currency is not reported as a compatible change: %v", changes)
	}
}

func TestNamedIncompatibleChangePasses(t *testing.T) {
	section := "- `shop.Charge` takes a currency.\n- shop.Refund is removed; use a negative Charge.\n- shop.Options.Check is removed.\n"
	if got := unnamed(fixtureChanges(t), section); len(got) != 0 {
		t.Fatalf("unnamed = %q, want none: each is named", got)
	}
}

func TestQualifiedName(t *testing.T) {
	for _, tc := range []struct {
		c    change
		want string
	}{
		{change{pkg: "idem", message: "(*Client).Close: removed"}, "idem.Client"},
		{change{pkg: "server", message: "Options.Store: changed from Store to *Store"}, "server.Options"},
		{change{pkg: "pgjournal", message: "Open: changed from func() to func(int)"}, "pgjournal.Open"},
		{change{pkg: "github.com/idem-go/idem/server/memstore", message: "package removed"}, "github.com/idem-go/idem/server/memstore"},
	} {
		if got := tc.c.qualifiedName(); got != tc.want {
			t.Errorf("qualifiedName(%q) = %q, want %q", tc.c.message, got, tc.want)
		}
	}
}

func TestUnreleasedSection(t *testing.T) {
	changelog := "# Changelog\n\n## Unreleased\n\n- idem.Foo renamed\n\n## v0.1.0\n\n- idem.Bar\n"
	if got := unreleased(changelog); got != "\n- idem.Foo renamed\n\n" {
		t.Errorf("unreleased = %q", got)
	}
	if got := releasedVersions("## v0.2.0\n## Unreleased\n## v0.1.0\n## v0.10.0-rc.1 x\n"); !slices.Equal(got, []string{"v0.1.0", "v0.2.0", "v0.10.0-rc.1"}) {
		t.Errorf("releasedVersions = %q", got)
	}
}
