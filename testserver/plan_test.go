// plan_test.go tests the fault mix spec, the seeded Plan and FaultKind's text form.

package testserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan(7, " lost=0.1, 503=0.05,429date=0.02 ,500bad=0.01,418=0.01,hold=0.03:250ms,slow=0.04,drop=0.05,reset=0")
	require.NoError(t, err)
	require.Equal(t, uint64(7), p.Seed)
	require.Equal(t, []Rate{
		{Fault{Kind: FaultLostResponse}, 0.1},
		{Fault{Kind: FaultStatus, Status: 503, RetryAfter: "1"}, 0.05},
		{Fault{Kind: FaultStatus, Status: 429, RetryAfterDate: 2 * time.Second}, 0.02},
		{Fault{Kind: FaultStatus, Status: 500, RetryAfter: "soon"}, 0.01},
		{Fault{Kind: FaultStatus, Status: 418}, 0.01},
		{Fault{Kind: FaultHold, Delay: 250 * time.Millisecond}, 0.03},
		{Fault{Kind: FaultSlowResponse}, 0.04},
		{Fault{Kind: FaultDropBefore}, 0.05},
		{Fault{Kind: FaultResetBody}, 0},
	}, p.Rates)

	for _, spec := range []string{"", "none", "  "} {
		p, err := ParsePlan(1, spec)
		require.NoError(t, err)
		require.Empty(t, p.Rates)
		require.Equal(t, FaultNone, p.Draw().Kind)
	}

	def, err := ParsePlan(1, "default")
	require.NoError(t, err)
	mix, err := ParsePlan(1, DefaultMix)
	require.NoError(t, err)
	require.Equal(t, mix.Rates, def.Rates)
	kinds := map[FaultKind]bool{}
	for _, r := range mix.Rates {
		kinds[r.Fault.Kind] = true
	}
	require.Len(t, kinds, len(faultKindNames)-1, "DefaultMix has every kind")
}

func TestParsePlanErrors(t *testing.T) {
	for _, spec := range []string{
		"lost",
		"lost=",
		"lost=x",
		"lost=1.5",
		"lost=-0.1",
		"lost=NaN",
		"lost=0.6,drop=0.6",
		"lost=0.1,,drop=0.1",
		"boom=0.1",
		"lost=0.1,lost=0.1",
		"lost=0.1:100ms",
		"hold=0.1:abc",
		"hold=0.1:-1s",
		"hold=0.1:0s",
		"200=0.1",
		"600=0.1",
		"503soon=0.1",
		"5=0.1",
	} {
		t.Run(spec, func(t *testing.T) {
			p, err := ParsePlan(1, spec)
			require.Nil(t, p)
			require.ErrorIs(t, err, ErrInvalidPlan)
			require.True(t, strings.HasPrefix(err.Error(), "testserver: "), err.Error())
		})
	}
}

func TestPlanDeterminism(t *testing.T) {
	draws := func(seed uint64) []Fault {
		p, err := ParsePlan(seed, DefaultMix)
		require.NoError(t, err)
		out := make([]Fault, 2000)
		for i := range out {
			out[i] = p.Draw()
		}
		return out
	}
	a, b := draws(42), draws(42)
	require.Equal(t, a, b, "same seed, same faults")
	require.NotEqual(t, a, draws(43))

	// The frequencies follow the rates.
	p, err := ParsePlan(1, DefaultMix)
	require.NoError(t, err)
	want := 0.0
	for _, r := range p.Rates {
		want += r.P
	}
	faulted := 0
	for _, f := range a {
		if f.Kind != FaultNone {
			faulted++
		}
	}
	require.InDelta(t, want, float64(faulted)/float64(len(a)), 0.05)

	var nilPlan *Plan
	require.Equal(t, Fault{}, nilPlan.Draw())
	always := &Plan{Seed: 1, Rates: []Rate{{Fault{Kind: FaultDropBefore}, 1}}}
	for range 100 {
		require.Equal(t, FaultDropBefore, always.Draw().Kind)
	}
}

func TestFaultKindText(t *testing.T) {
	for k := range faultKindNames {
		kind := FaultKind(k)
		got, err := ParseFaultKind(kind.String())
		require.NoError(t, err)
		require.Equal(t, kind, got)
	}
	_, err := ParseFaultKind("explode")
	require.Error(t, err)
	require.Equal(t, "FaultKind(99)", FaultKind(99).String())

	b, err := json.Marshal(Fault{Kind: FaultLostResponse})
	require.NoError(t, err)
	require.Contains(t, string(b), `"Kind":"lost"`)
	var f Fault
	require.NoError(t, json.Unmarshal([]byte(`{"Kind":"hold","Delay":5}`), &f))
	require.Equal(t, Fault{Kind: FaultHold, Delay: 5}, f)
	require.Error(t, json.Unmarshal([]byte(`{"Kind":"nope"}`), &f))
	_, err = json.Marshal(Fault{Kind: -1})
	require.Error(t, err)
}

func TestFaultString(t *testing.T) {
	require.Equal(t, `status 429 Retry-After="1"`, Fault{Kind: FaultStatus, Status: 429, RetryAfter: "1"}.String())
	require.Equal(t, "status 503 Retry-After=date+2s", Fault{Kind: FaultStatus, RetryAfterDate: 2 * time.Second}.String())
	require.Equal(t, "hold 1.5s", Fault{Kind: FaultHold}.String())
	require.Equal(t, "slow 2s", Fault{Kind: FaultSlowResponse}.String())
	require.Equal(t, "lost", Fault{Kind: FaultLostResponse}.String())
}
