package main

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// damageNewerMeta flips a byte of the newer of the journal's two meta pages
// (bbolt's layout: a 16-byte page header, then page size at +8, root at +16,
// transaction ID at +48).
func damageNewerMeta(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	ne := binary.NativeEndian
	ps := int(ne.Uint32(raw[16+8:]))
	page := 0
	if ne.Uint64(raw[ps+16+48:]) > ne.Uint64(raw[16+48:]) {
		page = 1
	}
	raw[page*ps+16+16] ^= 1
	require.NoError(t, os.WriteFile(path, raw, 0o600))
}

func TestJournalAcceptOlder(t *testing.T) {
	bin := idemBinary(t)
	path := journalWithRecords(t)
	damageNewerMeta(t, path)

	out, err := runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.Error(t, err)
	require.Contains(t, out, "meta page")
	require.Contains(t, out, "accept-older")

	out, err = runIdem(t, bin, 30*time.Second, "journal", "accept-older", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "now opens as of commit")

	out, err = runIdem(t, bin, 30*time.Second, "journal", "ls", path)
	require.NoError(t, err, out)
	out, err = runIdem(t, bin, 30*time.Second, "journal", "accept-older", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "nothing to accept")
}
