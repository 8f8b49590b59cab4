package idem

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fast path of mediaType returns what mime's parse and format return, on
// the usual values and on random strings over the characters that matter
// (token characters, case, the separators, space, quote, non-ASCII).
func TestMediaTypeFastPath(t *testing.T) {
	t.Parallel()
	values := []string{
		"application/json", "text/plain", "application/vnd.api+json", "application/x-www-form-urlencoded",
		"application/merge-patch+json", "multipart/form-data", "Application/JSON", "application/json;charset=utf-8",
		"application/json ", " application/json", "application", "/json", "application/", "a/b/c", "a//b",
		"text/plain; charset=\"utf-8\"", "application/json\t", "application/jsón", "*/*", "a/b{",
	}
	fast := 0
	for _, v := range values {
		require.Equal(t, parsedMediaType(v), mediaType(v), "%q", v)
		if plainMediaType(v) {
			fast++
		}
	}
	require.Equal(t, 7, fast, "the seven plain values take the fast path")

	const alphabet = "abzAZ09/;= \t\"'!#*+-.^_`|~(),:@[]?{}\\é"
	rng := rand.New(rand.NewPCG(1, 2))
	runes := []rune(alphabet)
	for range 200000 {
		b := make([]rune, 1+rng.IntN(8))
		for i := range b {
			b[i] = runes[rng.IntN(len(runes))]
		}
		v := string(b)
		if want, got := parsedMediaType(v), mediaType(v); got != want { // testify's 200,000 times took seconds under -race
			require.Equal(t, want, got, "%q", v)
		}
		if plainMediaType(v) {
			fast++
		}
	}
	require.Greater(t, fast, 300, "random values took the fast path too")
}
