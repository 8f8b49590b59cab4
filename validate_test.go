package idem

import (
	"net/url"
	"slices"
	"testing"
)

// FuzzPlainURL holds validRequest's and storedURL's shortcuts to the
// parser round trips they skip: a URL plainURL accepts must parse back, and
// storedURL must journal what it journaled when it always parsed again
// (storedURLReparsed, the code before the shortcut).
func FuzzPlainURL(f *testing.F) {
	for _, s := range [][7]string{
		{"127.0.0.1:8080", "/payments", "", "", "", "", ""},
		{"api.example.com", "/v1/charges", "", "a=1&token=s3cret", "frag", "", ""},
		{"example.com:", "/", "", "", "", "", ""},
		{"exa mple.com", "/", "", "", "", "", ""},
		{"example.com:99999", "/", "", "", "", "", ""},
		{"example.com:80x", "/", "", "", "", "", ""},
		{"[::1]:8080", "/p", "", "", "", "", ""},
		{"user@host", "/p", "", "", "", "", ""},
		{"host", "/a?b#c", "", "x=1#token=2", "", "", ""},
		{"host", "/a%2Fb", "/a%2Fb", "q=\x7f", "", "", ""},
		{"host", "no-slash", "", "", "", "alice:pw", ""},
		{"host", "", "", "", "", "", "//evil@host/?token=1"},
		{"host/x", "/", "", "token=1", "", "", ""},
		{"host#x", "/", "", "", "", "", ""},
		{"h\x00st", "/", "", "", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], false)
	}
	sensitive := map[string]bool{"token": true}
	f.Fuzz(func(t *testing.T, host, path, rawPath, rawQuery, fragment, user, opaque string, https bool) {
		u := &url.URL{Scheme: "http", Host: host, Path: path, RawPath: rawPath, RawQuery: rawQuery,
			Fragment: fragment, Opaque: opaque}
		if https {
			u.Scheme = "https"
		}
		if user != "" {
			u.User = url.User(user)
		}
		if plainURL(u) {
			if _, err := url.Parse(u.String()); err != nil {
				t.Fatalf("plainURL(%#v) = true, but %q does not parse: %v", u, u.String(), err)
			}
		}
		for _, names := range []map[string]bool{nil, sensitive} {
			got, gotDropped := storedURL(u, names)
			want, wantDropped := storedURLReparsed(u, names)
			if got != want || !slices.Equal(gotDropped, wantDropped) {
				t.Fatalf("storedURL(%#v) = %q %q, want %q %q", u, got, gotDropped, want, wantDropped)
			}
		}
	})
}

// storedURLReparsed is storedURL as it was before it skipped parsing
// again: the oracle of FuzzPlainURL.
func storedURLReparsed(u *url.URL, sensitive map[string]bool) (string, []string) {
	c := *u
	c.User, c.Fragment, c.RawFragment = nil, "", ""
	var dropped []string
	c.RawQuery, dropped = stripQuery(c.RawQuery, sensitive)
	s := c.String()
	if p, err := url.Parse(s); err == nil {
		q, more := stripQuery(p.RawQuery, sensitive)
		if p.User != nil || more != nil || p.Fragment != "" {
			p.User, p.RawQuery, p.Fragment, p.RawFragment = nil, q, "", ""
			s = p.String()
			dropped = append(dropped, more...)
			slices.Sort(dropped)
			dropped = slices.Compact(dropped)
		}
	}
	return s, dropped
}

func TestPlainURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want bool
	}{
		{"http://127.0.0.1:8080/payments", true},
		{"https://api.example.com/v1/charges?a=1", true},
		{"http://example.com/", true},
		{"http://example.com:/", false},  // empty port: left to the parser
		{"http://[::1]:8080/", false},    // IPv6 literal: left to the parser
		{"http://alice:pw@host/", false}, // userinfo
		{"http://xn--bcher-kva.example/", true},
		{"http://host:123456/", false}, // port of 6 digits
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := plainURL(u); got != c.want {
			t.Errorf("plainURL(%q) = %v, want %v", c.raw, got, c.want)
		}
	}
	// What url.Parse would refuse never takes the shortcut.
	for _, u := range []*url.URL{
		{Scheme: "http", Host: "exa mple.com", Path: "/"},
		{Scheme: "http", Host: "host", Path: "/", RawQuery: "a=\x01"},
		{Scheme: "http", Host: "h\x7fst", Path: "/"},
	} {
		if plainURL(u) {
			t.Errorf("plainURL(%#v) = true for a URL that does not parse back", u)
		}
	}
}
