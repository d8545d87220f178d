package ringnet

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments"
)

// Beside the bare ring, a ring algorithm's time per election message is
// its propagation over its messages; Bully's, whose winner may announce
// before any ELECTION reaches it (propagation 0), runs from the first
// suspicion until every server knows.
func TestBareSectionPerMessage(t *testing.T) {
	runs, err := experiments.ReadTable(strings.NewReader("backend,algorithm,n,detect_ms,propagation_ms,all_know_ms,election_msgs,elected_round_ms\n" +
		"local,chang-roberts,5,600,2,610,10,0.4\n" +
		"local,bully,5,600,0,620,20,0\n"))
	require.NoError(t, err)
	bare, err := experiments.ReadTable(strings.NewReader("backend,n,mode,hop_ms\nlocal,5,busy,0.05\nlocal,5,rest,0.08\nlocal,5,rest,0.08\nlocal,5,woken,0.0625\n"))
	require.NoError(t, err)
	out := bareSection(runs, bare, 1)
	// chang-roberts: 2 ms / 10 = 200 µs, 4× the 50 µs busy hop; ELECTED
	// round 0.4 ms / 4 hops = 100 µs, 2× busy, 1.25× the 80 µs hop at rest,
	// 1.6× the 62.5 µs woken hop.
	// No server's share in this CSV (from before it was kept): a dash.
	assert.Contains(t, out, "| chang-roberts | 5 | 50 | 80 | 62.5 | 100 | — | 2 | 1.25 | 1.6 | 200 | 4 | ≤ 2× busy: inconclusive (no interval: too few repetitions) |")
	// bully: (620 − 600) ms / 20 = 1,000 µs, 20× the hop; no round.
	assert.Contains(t, out, "| bully | 5 | 50 | 80 | 62.5 | — | — | — | — | — | 1000 | 20 | — |")

	// The survivors' own share of a hop, p50 over the repetitions that
	// report one (0: none did).
	shared, err := experiments.ReadTable(strings.NewReader("backend,algorithm,n,detect_ms,propagation_ms,all_know_ms,election_msgs,elected_round_ms,elected_forward_ms\n" +
		"local,chang-roberts,5,600,2,610,10,0.4,0.012\n" +
		"local,chang-roberts,5,600,2,610,10,0.4,0\n" +
		"local,chang-roberts,5,600,2,610,10,0.4,0.014\n" +
		"local,chang-roberts,5,600,2,610,10,0.4,0.013\n"))
	require.NoError(t, err)
	assert.Contains(t, bareSection(shared, bare, 1), "| chang-roberts | 5 | 50 | 80 | 62.5 | 100 | 13 | 2 |")

	// A CSV from before the rest mode: busy trips only.
	old, err := experiments.ReadTable(strings.NewReader("backend,n,hop_ms\nlocal,5,0.05\n"))
	require.NoError(t, err)
	assert.Contains(t, bareSection(runs, old, 1), "| chang-roberts | 5 | 50 | — | — | 100 | — | 2 | — | — | 200 | 4 |")
}

// readCSV is the table of a CSV text.
func readCSV(t *testing.T, csv string) *experiments.Table {
	t.Helper()
	tab, err := experiments.ReadTable(strings.NewReader(csv))
	require.NoError(t, err)
	return tab
}

// electedRuns is Chang–Roberts at n = 5, one repetition per value: an
// ELECTED round of 4 hops at that many ms a hop.
func electedRuns(t *testing.T, perHop []float64) *experiments.Table {
	t.Helper()
	var runs strings.Builder
	runs.WriteString("backend,algorithm,n,detect_ms,propagation_ms,all_know_ms,election_msgs,elected_round_ms\n")
	for _, h := range perHop {
		fmt.Fprintf(&runs, "local,chang-roberts,5,600,2,610,10,%g\n", 4*h)
	}
	return readCSV(t, runs.String())
}

// The ≤ 2× busy verdict rests on the ratio's bootstrap interval: met only
// when the whole interval is under it.
func TestBareSectionJudgesOnAnInterval(t *testing.T) {
	var perHop []float64
	var trips strings.Builder
	trips.WriteString("backend,n,mode,hop_ms\n")
	for i := range 12 {
		// ELECTED rounds at 60–71 µs a hop; busy trips 49–60 µs.
		perHop = append(perHop, 0.060+0.001*float64(i))
		fmt.Fprintf(&trips, "local,5,busy,%g\n", 0.049+0.001*float64(i))
	}
	assert.Regexp(t, `≤ 2× busy: met \(95 % interval 1\.[0-9]+–1\.[0-9]+\) \|`, bareSection(electedRuns(t, perHop), readCSV(t, trips.String()), 1))
}

// Pooled over rings, the bare side is resampled a ring at a time: ten rings
// whose busy hops sit 2 µs apart (15–33 µs) leave a ratio of about 1.8
// open, where their 200 trips taken one by one would call it met.
func TestBareSectionResamplesWholeRings(t *testing.T) {
	var perHop []float64
	for i := range 16 {
		perHop = append(perHop, 0.042+0.00025*float64(i)) // 42–46 µs a hop
	}
	// The same trips with their rings, and without: one by one, as a CSV
	// from before the rings were pooled is read.
	var pooled, unpooled strings.Builder
	pooled.WriteString("backend,n,mode,ring,hop_ms\n")
	unpooled.WriteString("backend,n,mode,hop_ms\n")
	for ring := range 10 {
		for trip := range 20 {
			hop := 0.015 + 0.002*float64(ring) + 0.00005*float64(trip)
			fmt.Fprintf(&pooled, "local,5,busy,%d,%g\n", ring, hop)
			fmt.Fprintf(&unpooled, "local,5,busy,%g\n", hop)
		}
	}
	runs := electedRuns(t, perHop)
	assert.Regexp(t, `≤ 2× busy: inconclusive \(95 % interval 1\.[0-9]+–2\.[0-9]+\) \|`, bareSection(runs, readCSV(t, pooled.String()), 1))
	assert.Regexp(t, `≤ 2× busy: met \(95 % interval 1\.[0-9]+–1\.[0-9]+\) \|`, bareSection(runs, readCSV(t, unpooled.String()), 1))
}

// With the trips pooled over rings, the report says how far apart the
// rings' busy hops were; a CSV from before the rings were pooled says
// nothing of it.
func TestBareSectionRingSpread(t *testing.T) {
	runs, err := experiments.ReadTable(strings.NewReader("backend,algorithm,n,detect_ms,propagation_ms,all_know_ms,election_msgs,elected_round_ms\n" +
		"local,chang-roberts,5,600,2,610,10,0.4\n"))
	require.NoError(t, err)
	pooled, err := experiments.ReadTable(strings.NewReader("backend,n,mode,ring,hop_ms\n" +
		"local,5,busy,0,0.008\nlocal,5,busy,0,0.010\nlocal,5,busy,0,0.009\n" +
		"local,5,busy,1,0.036\nlocal,5,busy,1,0.034\nlocal,5,busy,1,0.035\n" +
		"local,5,rest,0,0.5\nlocal,5,rest,1,0.001\n"))
	require.NoError(t, err)
	// Ring 0's p50 9 µs, ring 1's 35; the rest mode's rings are not busy.
	assert.Contains(t, bareSection(runs, pooled, 1), "lowest–highest of the pooled rings: n = 5 9–35 — ")
	// The text counts the rings and each mode's trips from the CSV.
	assert.Contains(t, bareSection(runs, pooled, 1), "pooled over 2 rings of fresh processes")
	assert.Contains(t, bareSection(runs, pooled, 1), "timed *busy* (6 trips back to back")
	assert.Contains(t, bareSection(runs, pooled, 1), "*at rest* (2 trips, each")

	single, err := experiments.ReadTable(strings.NewReader("backend,n,mode,hop_ms\nlocal,5,busy,0.05\n"))
	require.NoError(t, err)
	assert.NotContains(t, bareSection(runs, single, 1), "pooled rings")
}
