package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/imports"
)

// A README's ```go block is a fragment of a program. The line before its
// fence is a marker, an HTML comment GitHub does not show, saying how the
// fragment becomes a real program (docs/releasing.md has the convention):
//
//	<!-- snippet: KIND[; given: DECL; DECL…][; then: STMT; STMT…] -->
//
// KIND is one of:
//   - statements: the body of func run(ctx context.Context) (err error), so
//     the fragment may use ctx, return err, and leave err unchecked where its
//     comment says "check each err";
//   - test: the body of func TestSnippet(t *testing.T), in a _test.go file;
//   - file: top-level declarations of package main;
//   - test file: top-level declarations in a _test.go file of package main;
//   - not a program: not compiled (a signature listing, a sketch of output).
//
// given declares, at top level, what the reader's own code is assumed to have
// (a func without a body gets one that panics); then appends statements the
// reader's code goes on to run, such as "_ = client" for a value it uses later.
// Imports are added by goimports, as the reader's editor would.
const markerPrefix = "<!-- snippet:"

var kinds = []string{"statements", "test", "file", "test file", "not a program"}

type snippet struct {
	file  string // the markdown file, relative to the repository's top
	line  int    // the line of the fragment's first line of code
	kind  string
	given []string
	then  []string
	code  string
}

// name is the snippet's package directory in the user's module.
func (s snippet) name() string {
	slug := strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(strings.ToLower(strings.TrimSuffix(s.file, ".md")))
	return fmt.Sprintf("%s_%d", slug, s.line)
}

// snippets returns the marked Go blocks of the README of every package of a
// published module, and fails on a Go block without a marker.
func (r *repo) snippets() ([]snippet, error) {
	out, err := run(r.top, nil, "git", "ls-files", "-co", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var all []snippet
	for _, f := range strings.Split(strings.TrimSpace(out), "\n") {
		if path.Base(f) != "README.md" || r.owner(f) == "" || slices.Contains(strings.Split(f, "/"), "testdata") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.top, f))
		if err != nil {
			return nil, err
		}
		snips, err := parseSnippets(f, string(data))
		if err != nil {
			return nil, err
		}
		all = append(all, snips...)
	}
	return all, nil
}

// parseSnippets returns the Go blocks of one markdown file with their markers;
// blocks marked "not a program" are left out.
func parseSnippets(file, text string) ([]snippet, error) {
	lines := strings.Split(text, "\n")
	var snips []snippet
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if strings.HasPrefix(trimmed, markerPrefix) && !(i+1 < len(lines) && isGoFence(lines[i+1])) {
			return nil, fmt.Errorf("%s:%d: a snippet marker not directly followed by a ```go fence", file, i+1)
		}
		fence, ok := strings.CutPrefix(trimmed, "```")
		if !ok {
			continue
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a code block that is never closed", file, start)
		}
		if lang := strings.Fields(fence + " x")[0]; lang != "go" {
			continue
		}
		if start < 2 || !strings.HasPrefix(strings.TrimSpace(lines[start-2]), markerPrefix) {
			return nil, fmt.Errorf("%s:%d: a ```go block without a %s … --> marker on the line before it (docs/releasing.md)", file, start-1, markerPrefix)
		}
		s, err := parseMarker(strings.TrimSpace(lines[start-2]))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, start-1, err)
		}
		if s.kind == "not a program" {
			continue
		}
		var code []string
		for _, l := range lines[start:i] {
			code = append(code, strings.TrimPrefix(l, indent))
		}
		s.file, s.line, s.code = file, start+1, strings.Join(code, "\n")
		snips = append(snips, s)
	}
	return snips, nil
}

func isGoFence(line string) bool {
	fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```")
	return ok && strings.Fields(fence + " x")[0] == "go"
}

// parseMarker reads "<!-- snippet: KIND; given: …; then: … -->".
func parseMarker(marker string) (snippet, error) {
	body, ok := strings.CutSuffix(strings.TrimPrefix(marker, markerPrefix), "-->")
	if !ok {
		return snippet{}, fmt.Errorf("a snippet marker must be closed by --> on the same line")
	}
	parts := splitTop(body)
	s := snippet{kind: strings.TrimSpace(parts[0])}
	if !slices.Contains(kinds, s.kind) {
		return snippet{}, fmt.Errorf("snippet kind %q, want one of %s", s.kind, strings.Join(kinds, ", "))
	}
	var clause *[]string
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		if rest, ok := strings.CutPrefix(p, "given:"); ok {
			clause, p = &s.given, rest
		} else if rest, ok := strings.CutPrefix(p, "then:"); ok {
			clause, p = &s.then, rest
		}
		if clause == nil {
			return snippet{}, fmt.Errorf("snippet marker: %q is neither a given: nor a then: clause", p)
		}
		*clause = append(*clause, strings.TrimSpace(p))
	}
	return s, nil
}

// splitTop splits s at the semicolons outside brackets and parentheses.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ';':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// files returns the program made of the snippet: file name to contents. A
// /*line*/ directive makes the compiler report the fragment's errors at their
// line in the markdown file.
func (s snippet) files() map[string]string {
	var b strings.Builder
	b.WriteString("package main\n\n")
	for _, d := range s.given {
		if strings.HasPrefix(d, "func ") && !strings.HasSuffix(d, "}") {
			d += ` { panic("the reader's own") }`
		}
		b.WriteString(d + "\n")
	}
	at := fmt.Sprintf("/*line %s:%d:1*/", s.file, s.line)
	body := at + s.code + "\n/*line wrapper.go:1:1*/" + strings.Join(s.then, "\n") + "\n"
	name := "snippet.go"
	switch s.kind {
	case "statements":
		b.WriteString("\nfunc run(ctx context.Context) (err error) {\n" + body + "return err\n}\n")
	case "test":
		b.WriteString("\nfunc TestSnippet(t *testing.T) {\n" + body + "}\n")
		name = "snippet_test.go"
	case "file", "test file":
		b.WriteString("\n" + at + s.code + "\n")
		if s.kind == "test file" {
			name = "snippet_test.go"
		}
	}
	files := map[string]string{name: b.String()}
	if s.kind != "file" || !strings.Contains(s.code, "func main()") {
		files["main.go"] = "package main\n\nfunc main() {}\n"
	}
	return files
}

// fixImports adds the imports a generated snippet file needs, as goimports
// does, resolving them in the module around the file.
func fixImports(file string) error {
	out, err := imports.Process(file, nil, nil)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}
