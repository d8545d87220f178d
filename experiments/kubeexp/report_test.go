package kubeexp

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments"
)

func report(t *testing.T, e experiments.Experiment, csv string) string {
	t.Helper()
	tab, err := experiments.ReadTable(strings.NewReader(csv))
	require.NoError(t, err)
	out, err := e.Report(&experiments.ReportInput{Table: tab, Dir: t.TempDir(), Meta: experiments.Meta{Experiment: e.Spec().Name}})
	require.NoError(t, err)
	return out
}

// A repetition in which an application never elected has fewer leaders to
// spread; it must not make the balance target read as met.
func TestDistributionVerdictNeedsEveryApplicationElected(t *testing.T) {
	const head = "backend,algorithm,scenario,apps,rep,node,leaders,apps_elected,overlaps\n"
	balanced := "kube,bld,spread,3,0,w1,1,3,0\nkube,bld,spread,3,0,w2,1,3,0\nkube,bld,spread,3,0,w3,1,3,0\n"
	stalled := "kube,bld,spread,3,1,w1,1,2,0\nkube,bld,spread,3,1,w2,1,2,0\nkube,bld,spread,3,1,w3,0,2,0\n"
	out := report(t, &Distribution{}, head+balanced)
	assert.Contains(t, out, "bld worst max − min = 0 over the repetitions in which every application elected (target ≤ 1 with every application elected: met)")

	out = report(t, &Distribution{}, head+balanced+stalled)
	assert.Contains(t, out, "bld worst max − min = 0 over the repetitions in which every application elected, and 1 in which some never did (target ≤ 1 with every application elected: **missed**)")

	// A skewed repetition with a stalled election is still left out of the
	// spread: its 2:0:0 says nothing about balance.
	skewedStall := "kube,bld,spread,3,2,w1,2,2,0\nkube,bld,spread,3,2,w2,0,2,0\nkube,bld,spread,3,2,w3,0,2,0\n"
	out = report(t, &Distribution{}, head+balanced+skewedStall)
	assert.Contains(t, out, "worst max − min = 0 over")
}

func TestLatencyReportsApplicationsThatNeverElected(t *testing.T) {
	const head = "backend,algorithm,apps,rep,app,latency_ms,campaign_latency_ms,overlaps,elected\n"
	rows := "kube,default,3,0,app-0,10,5,0,true\nkube,default,3,0,app-1,12,6,0,true\nkube,default,3,0,app-2,14,7,0,true\n" +
		"kube,bld,3,0,app-0,11,5,0,true\nkube,bld,3,0,app-1,NaN,NaN,0,false\nkube,bld,3,0,app-2,13,6,0,true\n"
	out := report(t, &Latency{}, head+rows)
	assert.Contains(t, out, "| bld | 3 | 2 | 1 | 12 |", "two elections, one never elected, mean over the two")
	assert.Contains(t, out, "**1 application elections never produced a leader")
	assert.Contains(t, out, "target ≤ 1.3 with every application elected: **missed**", "1.0 ≤ 1.3, but an election stalled")
}

func TestDisjointChance(t *testing.T) {
	assert.InDelta(t, 1.0, disjointChance(1), 1e-12, "two single values never overlap (ties aside)")
	assert.InDelta(t, 0.1, disjointChance(3), 1e-12)
	assert.InDelta(t, 2.0/252, disjointChance(5), 1e-12)
	assert.True(t, math.IsNaN(disjointChance(0)))
}

// kube-split-brain refuses settings it cannot run, by name, before it
// starts anything.
func TestSplitBrainRefusesBadSettings(t *testing.T) {
	for _, args := range [][]string{
		{"--length", "NaN"}, {"--length", "0"}, {"--length", "11"},
		{"--rate", "NaN"}, {"--rate", "0"}, {"--rate", "1000"},
		{"--replicas", "2"}, {"--writers", "0"}, {"--lease", "1h"},
		{"--fault", "skew", "--algorithms", "default"},
	} {
		_, _, err := experiments.RunArgs(t.Context(), &SplitBrain{}, args, experiments.RunOptions{Seed: 1, Reps: 1, Out: t.TempDir()})
		assert.Error(t, err, "%v", args)
	}
}

// A negative --parallel is refused by name, before any cluster starts.
func TestParallelMustNotBeNegative(t *testing.T) {
	for _, e := range []experiments.Experiment{&Reelection{}, &Distribution{}, &SplitBrain{}} {
		_, _, err := experiments.RunArgs(t.Context(), e, []string{"--parallel", "-3"}, experiments.RunOptions{Seed: 1, Reps: 1, Out: t.TempDir()})
		assert.ErrorContains(t, err, "--parallel -3", "%T", e)
	}
}

// A latency target's verdict rests on the ratio's bootstrap interval over
// the (applications, repetition) groups: met or missed only when the whole
// interval is on one side of the target, inconclusive from one repetition.
func TestLatencyVerdictsRestOnAnInterval(t *testing.T) {
	const head = "backend,algorithm,apps,rep,app,latency_ms,campaign_latency_ms,overlaps,elected,max_minus_min\n"
	table := func(reps int, factor float64) string {
		var b strings.Builder
		for rep := range reps {
			for app := range 3 {
				d := 20.0 + float64((rep*3+app)%5) // 20–24 ms, varying
				fmt.Fprintf(&b, "kube,default,3,%d,app-%d,%g,%g,0,true,2\n", rep, app, d+30, d)
				fmt.Fprintf(&b, "kube,bld-optimistic,3,%d,app-%d,%g,%g,0,true,0\n", rep, app, factor*d+30, factor*d)
			}
		}
		return b.String()
	}
	out := report(t, &Latency{}, head+table(6, 1.5))
	assert.Contains(t, out, "bld-optimistic / default mean latency from campaign start: 1.5,")
	assert.Contains(t, out, "every application elected: **missed** (95 % interval 1.5–1.5)")
	out = report(t, &Latency{}, head+table(6, 1.1))
	assert.Contains(t, out, "every application elected: met (95 % interval 1.1–1.1)")
	out = report(t, &Latency{}, head+table(1, 1.1))
	assert.Contains(t, out, "every application elected: inconclusive (no interval: too few repetitions)", "one repetition is no interval")
}

// A hold shorter than the candidates' start-up leaves the latencies from
// campaign start with start-up in them; the report says so, and only then.
func TestLatencySaysWhenTheHoldWasOutrun(t *testing.T) {
	const head = "backend,algorithm,apps,rep,app,latency_ms,campaign_latency_ms,overlaps,elected,campaign_spread_ms,campaign_together_ms,leader_after_instant_ms\n"
	rows := func(spreads ...float64) string {
		var b strings.Builder
		for i, s := range spreads {
			fmt.Fprintf(&b, "kube,default,3,0,app-%d,30020,20,0,true,%g,30000,20\n", i, s)
		}
		return b.String()
	}
	out := report(t, &Latency{}, head+rows(12, 634, 1000))
	assert.Contains(t, out, "held to campaign at one instant")
	assert.NotContains(t, out, "held elections a candidate began", "0.634 s and 1 s apart are candidates woken together")

	out = report(t, &Latency{}, head+rows(12, 1001, 18403.8))
	assert.Contains(t, out, "**In 2 of 3 held elections a candidate began its campaign over 1 s after its application's first**")

	out = report(t, &Latency{}, strings.ReplaceAll(head+rows(5000), ",30000,", ",0,"))
	assert.NotContains(t, out, "held elections", "no hold, nothing to outrun")
}
