package main

import (
	"compress/gzip"
	"encoding/csv"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A soak spreads its kills over the duration and outlasts it; bad flags are
// usage errors.
func TestSoakConfigApply(t *testing.T) {
	parse := func(args ...string) (demoConfig, error) {
		cfg := demoConfig{kills: 30, killAfter: 1500 * time.Millisecond, budget: 15 * time.Minute}
		fs := flag.NewFlagSet("idem chaos", flag.ContinueOnError)
		cfg.register(fs)
		var sc soakConfig
		registerSoak(fs, &sc)
		require.NoError(t, fs.Parse(args))
		return cfg, sc.apply(fs, &cfg)
	}
	cfg, err := parse("-duration", "20m")
	require.NoError(t, err)
	require.NotNil(t, cfg.soak)
	// 30 lives of 0.6 killAfter on average: the kills end at about 85% of 20 minutes.
	require.InDelta(t, (17 * time.Minute).Seconds(), (30 * 6 * cfg.killAfter / 10).Seconds(), 1)
	require.Equal(t, 25*time.Minute, cfg.budget)

	cfg, err = parse("-duration", "1m", "-kill-within", "3s", "-timeout", "2m")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{3 * time.Second, 2 * time.Minute}, []time.Duration{cfg.killAfter, cfg.budget})

	cfg, err = parse("-n", "10")
	require.NoError(t, err)
	require.Nil(t, cfg.soak, "no -duration, no soak")

	for _, bad := range [][]string{
		{"-duration", "-1s"},
		{"-duration", "1m", "-sample-every", "0s"},
		{"-duration", "1m", "-retention", "10s"},
		{"-duration", "1m", "-soak-out", ""},
		{"-duration", "1m", "-journal", "postgres://127.0.0.1/x"},
	} {
		_, err := parse(bad...)
		require.ErrorContains(t, err, "idem chaos:", "%q", bad)
	}
}

// Each life starts at the first payment not seen settled and finishes every
// payment started so far.
func TestSoakArgs(t *testing.T) {
	s := newSoakSide(t)
	s.soak.cfg.duration, s.soak.cfg.retention = time.Minute, 2*time.Minute
	for _, i := range []int{0, 1, 2, 4} {
		s.settled.add(opID(i))
	}
	s.soak.started = 7
	args := s.soakArgs()
	until := s.soak.until
	require.WithinDuration(t, time.Now().Add(time.Minute), until, 5*time.Second)
	require.Equal(t, []string{"-from", "3", "-n", "7", "-until", strconv.FormatInt(until.UnixNano(), 10),
		"-retention", "2m0s", "-stats", "1s"}, args)
	s.settled.add(opID(3))
	require.Equal(t, "5", s.soakArgs()[1], "3 and 4 settled since")
	require.Equal(t, until, s.soak.until, "one deadline for every life")
	require.Nil(t, (&side{}).soakArgs(), "no soak, no flags")
}

// TestChaosSoakShort is "idem chaos -duration" cut down for CI: payments for
// a few seconds through the fault plan and 3 SIGKILLs, sampled every second,
// then every payment started checked exactly once on the ledger.
func TestChaosSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	bin := idemBinary(t)
	prefix := filepath.Join(t.TempDir(), "soak")
	out, err := runIdem(t, bin, 3*time.Minute, "chaos", "-duration", "12s", "-kills", "3", "-retention", "1m",
		"-sample-every", "1s", "-soak-out", prefix, "-seed", "3", "-heap-profiles")
	require.NoError(t, err, out)
	m := regexp.MustCompile(`(\d+)/(\d+) payments made exactly once through 3 SIGKILLs`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, m[1], m[2])
	n, _ := strconv.Atoi(m[1])
	require.Greater(t, n, 100, "payments flowed for 12 s")
	require.Regexp(t, `payments to make\s+`+m[1]+`\b`, out)

	f, err := os.Open(prefix + ".csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(rows), 1+10, "a sample a second for 12 s and more")
	require.Equal(t, "client_heap_mib", rows[0][1])
	withClient := 0
	for _, r := range rows[1:] {
		if r[1] != "" {
			withClient++
			heap, err := strconv.ParseFloat(r[1], 64)
			require.NoError(t, err)
			require.Positive(t, heap)
		}
		journal, err := strconv.ParseFloat(r[7], 64)
		require.NoError(t, err)
		require.Positive(t, journal, "the journal file's size")
	}
	require.GreaterOrEqual(t, withClient, 5, "the worker's stats lines reached most samples")
	// Nothing expires in 12 s of a 1-minute TTL: the store holds a key for
	// each payment settled, and for those in flight.
	last := rows[len(rows)-1]
	require.Equal(t, []string{"settled", "server_live_keys"}, rows[0][12:14])
	settled, err := strconv.Atoi(last[12])
	require.NoError(t, err)
	live, err := strconv.Atoi(last[13])
	require.NoError(t, err)
	require.InDelta(t, settled, live, 64, "live keys against payments settled")

	// The warm-up's profile comes after 2 minutes, the end's always.
	require.NoFileExists(t, prefix+"-heap-1.pprof")
	hf, err := os.Open(prefix + "-heap-2.pprof")
	require.NoError(t, err)
	defer hf.Close()
	zr, err := gzip.NewReader(hf) // a profile is gzipped protocol buffers
	require.NoError(t, err)
	size, err := io.Copy(io.Discard, zr)
	require.NoError(t, err)
	require.Greater(t, size, int64(1000), "a heap profile's samples")

	pf, err := os.Open(prefix + ".png")
	require.NoError(t, err)
	defer pf.Close()
	_, err = png.Decode(pf)
	require.NoError(t, err)
}
