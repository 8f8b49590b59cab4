// Tests that binding operations to identities writes no credential to the
// journal file: its raw bytes are searched for every token, and for their
// unkeyed hashes, with and without Options.Journal.Encryption.

package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-go/idem/journal/boltjournal"
	"github.com/idem-go/idem/testserver"
	"github.com/stretchr/testify/require"
)

func TestIdentityNoCredentialOnDisk(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "encrypted"}[encrypted], func(t *testing.T) {
			t.Parallel()
			testIdentityNoCredentialOnDisk(t, encrypted)
		})
	}
}

func testIdentityNoCredentialOnDisk(t *testing.T, encrypted bool) {
	pay, base, rt := paymentsOver(t, false)
	opts := Options{MaxAttempts: 1, SensitiveQueryParams: []string{"token"}}
	if encrypted {
		opts.Journal.Encryption = &boltjournal.Keyring{Current: "k1", Keys: map[string][]byte{"k1": newKey32(t)}}
	}
	path := filepath.Join(t.TempDir(), "identity.journal")
	j, err := boltjournal.Open(path, &opts.Journal)
	require.NoError(t, err)
	tr, _ := transportOn(t, j, opts, rt, time.Time{})

	// Settled and pending operations, with a declared identity and without;
	// credentials in a header, the URL's userinfo and a query parameter.
	const (
		userPass   = "uiPASS_9d2e"
		queryToken = "QTOK_51ac"
	)
	pay.Script(testserver.Fault{}, testserver.Fault{}, testserver.Fault{Kind: testserver.FaultStatus},
		testserver.Fault{Kind: testserver.FaultStatus})
	for i, c := range []struct {
		op, identity string
	}{{"settled-undeclared", ""}, {"settled-acme", "acme-tenant"}, {"pending-undeclared", ""}, {"pending-globex", "globex-tenant"}} {
		ctx := WithOperationID(context.Background(), c.op)
		if c.identity != "" {
			ctx = WithIdentity(ctx, c.identity)
		}
		req := tenantPayment(t, ctx, base, c.op, tokenAcme)
		req.URL.RawQuery = "token=" + queryToken
		req.URL.User = url.UserPassword("ui", userPass)
		resp, err := tr.RoundTrip(req)
		if i < 2 {
			require.NoError(t, err)
			drain(t, resp)
		} else {
			pendingErr(t, err)
		}
	}
	var tags []string
	for _, op := range []string{"settled-undeclared", "pending-undeclared"} {
		rec, err := j.Lookup(op)
		require.NoError(t, err)
		require.Len(t, rec.CredentialTag, 32, "128 bits in hex")
		tags = append(tags, rec.CredentialTag)
	}
	require.Equal(t, tags[0], tags[1], "the same credentials, the same tag")
	// The key is the journal's own, 32 bytes (boltjournal's
	// TestIdentityKeyKeptInFile finds it in the file's meta bucket).
	require.Len(t, j.IdentityKey(), 32)
	require.NoError(t, j.Close())

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var secrets []string
	for _, s := range []string{tokenAcme, "acme_tok_3f9a1c", userPass, queryToken} {
		sum := sha256.Sum256([]byte(s))
		// Hex, and the raw bytes the journal's binary form stores hex in.
		secrets = append(secrets, s, hex.EncodeToString(sum[:]), hex.EncodeToString(sum[:16]),
			string(sum[:]), string(sum[:16]))
	}
	requireAbsent(t, raw, "the journal", secrets...)
	tag, err := hex.DecodeString(tags[0])
	require.NoError(t, err)
	if encrypted {
		requireAbsent(t, raw, "the encrypted journal", "acme-tenant", "globex-tenant", tags[0], string(tag))
	} else {
		// What is not sealed is there to be found: the search can fail.
		for _, s := range []string{"globex-tenant", string(tag)} {
			require.True(t, bytes.Contains(raw, []byte(s)), "the plaintext journal should hold %q", s)
		}
	}

	// A second journal tags the same credentials differently: a tag links
	// nothing across journals.
	j2, err := boltjournal.Open(filepath.Join(t.TempDir(), "other.journal"), &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j2.Close() })
	tr2, _ := transportOn(t, j2, opts, rt, time.Time{})
	req := tenantPayment(t, WithOperationID(context.Background(), "other"), base, "other", tokenAcme)
	req.URL.RawQuery = "token=" + queryToken
	req.URL.User = url.UserPassword("ui", userPass)
	resp, err := tr2.RoundTrip(req)
	require.NoError(t, err)
	drain(t, resp)
	rec, err := j2.Lookup("other")
	require.NoError(t, err)
	require.NotEqual(t, tags[0], rec.CredentialTag)
	require.NotEmpty(t, rec.CredentialTag)

	// After a restart the tag still matches its credentials, and no others.
	j3, err := boltjournal.Open(path, &opts.Journal)
	require.NoError(t, err)
	t.Cleanup(func() { j3.Close() })
	tr3, _ := transportOn(t, j3, opts, rt, time.Time{})
	for _, token := range []string{tokenGlobex, tokenAcme} {
		req := tenantPayment(t, WithOperationID(context.Background(), "settled-undeclared"), base, "settled-undeclared", token)
		req.URL.RawQuery = "token=" + queryToken
		req.URL.User = url.UserPassword("ui", userPass)
		resp, err := tr3.RoundTrip(req)
		if token == tokenGlobex {
			require.ErrorIs(t, err, ErrIdentityMismatch)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
		drain(t, resp)
	}
}
