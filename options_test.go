// Options' exported defaults: the default lists are functions returning fresh
// slices, so no caller can change another's defaults (issue 14, item 7).

package idem

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultListsAreFreshCopies(t *testing.T) {
	t.Parallel()
	m := DefaultMethods()
	require.Equal(t, []string{http.MethodPost, http.MethodPatch}, m)
	m[0] = http.MethodGet
	require.Equal(t, []string{http.MethodPost, http.MethodPatch}, DefaultMethods())

	h := DefaultSensitiveHeaders()
	require.Equal(t, []string{"Authorization", "Proxy-Authorization", "Cookie"}, h)
	h[0] = "X-Not-Secret"
	require.Equal(t, []string{"Authorization", "Proxy-Authorization", "Cookie"}, DefaultSensitiveHeaders())

	// A changed copy changes no Transport's configuration either.
	c, err := (*Options)(nil).config()
	require.NoError(t, err)
	require.True(t, c.methods[http.MethodPost])
	require.False(t, c.methods[http.MethodGet])
	require.True(t, c.sensitive["Authorization"])
	require.False(t, c.sensitive["X-Not-Secret"])
}
