package main

import (
	"strings"
	"testing"
)

func TestParseSnippets(t *testing.T) {
	md := "# T\n\n<!-- snippet: statements; given: var api string; func reconcile(*idem.Record); then: _ = c -->\n```go\nc, err := idem.Open(api, nil)\n```\n\n" +
		"<!-- snippet: not a program -->\n```go\nfunc Open(path string) (*Client, error)\n```\n\n```sh\ngo test ./...\n```\n"
	snips, err := parseSnippets("README.md", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(snips) != 1 {
		t.Fatalf("%d snippets, want 1 (the one marked not a program left out)", len(snips))
	}
	s := snips[0]
	if s.kind != "statements" || s.line != 5 || s.code != "c, err := idem.Open(api, nil)" {
		t.Errorf("snippet = %+v", s)
	}
	if strings.Join(s.given, "|") != "var api string|func reconcile(*idem.Record)" || strings.Join(s.then, "|") != "_ = c" {
		t.Errorf("given %q, then %q", s.given, s.then)
	}
	src := s.files()["snippet.go"]
	for _, want := range []string{
		`func reconcile(*idem.Record) { panic("the reader's own") }`,
		"func run(ctx context.Context) (err error) {\n/*line README.md:5:1*/c, err := idem.Open(api, nil)\n",
		"_ = c\nreturn err\n}",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("program lacks %q:\n%s", want, src)
		}
	}
}

func TestParseSnippetsRefusesUnmarked(t *testing.T) {
	for name, md := range map[string]string{
		"no marker":              "Text:\n\n```go\nx := 1\n```\n",
		"marker not before code": "<!-- snippet: statements -->\n\n```go\nx := 1\n```\n",
		"unknown kind":           "<!-- snippet: fragment -->\n```go\nx := 1\n```\n",
		"unclosed block":         "<!-- snippet: statements -->\n```go\nx := 1\n",
	} {
		if _, err := parseSnippets("README.md", md); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSplitTop(t *testing.T) {
	got := splitTop(" statements; given: var d struct{ A int; B string }; func f(a, b int)")
	if len(got) != 3 || strings.TrimSpace(got[1]) != "given: var d struct{ A int; B string }" {
		t.Errorf("splitTop = %q", got)
	}
}
