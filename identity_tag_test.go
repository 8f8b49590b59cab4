package idem

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A credential tag from the journal's pooled hash is the HMAC of a hash made
// afresh, call after call and from many goroutines at once: a pooled hash
// comes back keyed and empty, never holding an earlier call's credentials.
func TestCredentialTagPooledHash(t *testing.T) {
	t.Parallel()
	j := memStore(t)
	want := func(creds []byte) string {
		m := hmac.New(sha256.New, j.IdentityKey())
		m.Write([]byte(credentialTagContext))
		m.Write(creds)
		return hex.EncodeToString(m.Sum(nil)[:16])
	}
	tagOf := newTagger(j.IdentityKey()) // one pool of keyed hashes, shared by the goroutines
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for n := range 8 {
		wg.Go(func() {
			for i := range 200 {
				creds := fmt.Appendf(nil, "h\x0dAuthorization\x01\x0fBearer tok-%d-%d", n, i%3)
				if got, w := tagOf.tag(creds), want(creds); got != w {
					errs <- fmt.Errorf("goroutine %d call %d: tag %s, want %s", n, i, got, w)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NotEqual(t, tagOf.tag(nil), tagOf.tag([]byte("u\x01a")), "other credentials, other tag")
}
