package ringnet

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/experiments/ringsim"
	"github.com/ringside/ringside/ring"
)

// Failover is ring-failover: SIGKILL the coordinator, time detection,
// election propagation and the moment every server knows the new one.
type Failover struct {
	ns         experiments.IntList
	algorithms experiments.ChoiceList
	bareRings  int
	srv        serverFlags
}

func (*Failover) Spec() experiments.Spec {
	return experiments.Spec{Name: "ring-failover", Backends: backends, Quick: 20, Row: ringsim.FailoverRow{},
		Summary: "SIGKILL the coordinator of a ringnode ring: detection, election propagation, all servers know the new coordinator"}
}

func (f *Failover) Flags(fs *flag.FlagSet) {
	f.algorithms = experiments.ChoiceList{Vals: []string{ring.ChangRoberts}, Allowed: ring.AlgorithmNames()}
	fs.Var(&f.ns, "n", "ring sizes, comma-separated (default: 3,5,16 quick — the sizes the report holds against the bare ring, and the smallest; 3,5,8,12,16 paper)")
	fs.Var(&f.algorithms, "algorithm", "the servers' election algorithms, comma-separated or all (a ring per algorithm and size): "+
		strings.Join(ring.AlgorithmNames(), ", "))
	fs.IntVar(&f.bareRings, "bare-rings", 10, fmt.Sprintf("rings of fresh processes the bare token ring's trips are pooled over, per size and mode (%d busy, %d at rest and %d woken trips each; 1–%d): "+
		"more rings narrow the interval of the ratio to it", busyTrips, restTrips, restTrips, maxBareRings))
	f.srv.define(fs)
}

func (f *Failover) Run(ctx context.Context, env *experiments.Env) error {
	ns := experiments.Points(f.ns, env.Profile, experiments.IntList{3, 5, 16}, experiments.IntList{3, 5, 8, 12, 16})
	if f.bareRings < 1 || f.bareRings > maxBareRings {
		return fmt.Errorf("--bare-rings %d: must be 1–%d", f.bareRings, maxBareRings)
	}
	for _, n := range ns {
		if n < 2 {
			return fmt.Errorf("n=%d: a failover needs at least 2 servers", n)
		}
	}
	algs := f.algorithms.Vals
	var rings ringPerCell
	defer rings.Close()
	// The algorithms of one size share their repetitions' seeds.
	grid := experiments.Grid{Cells: len(ns) * len(algs), SameSeed: len(algs)}
	return experiments.RunGrid(ctx, env, grid, func(ctx context.Context, t experiments.Task) ([]ringsim.FailoverRow, error) {
		n, alg := ns[t.Cell/len(algs)], algs[t.Cell%len(algs)]
		r, err := rings.get(t.Cell, func() (ringnodes.Ring, error) {
			// The bare ring first, once per size and alone: they must not
			// share the CPU.
			if env.Backend == "local" && t.Cell%len(algs) == 0 {
				if err := f.bare(ctx, env, n); err != nil {
					return nil, err
				}
			}
			srv := f.srv
			srv.election = alg
			return startRing(ctx, env, n, &srv)
		})
		if err != nil {
			return nil, fmt.Errorf("n=%d %s: %w", n, alg, err)
		}
		var profiled chan error
		if c, ok := r.(*cleanup); ok && n == slices.Max(ns) && alg == algs[0] && t.Rep == 0 {
			profiled = profileFailover(ctx, env, c)
		}
		res, err := killQuiet(ctx, env, r, n)
		if profiled != nil {
			if perr := <-profiled; perr != nil && err == nil {
				err = perr
			}
		}
		// The ring's scratch folder goes when it closes: what its servers
		// logged is the only account of how it settled, kept for a ring
		// that did not settle (a loaded machine's run, once) or settled
		// on a wrong coordinator.
		kept := filepath.Join(env.Dir, fmt.Sprintf("%s-n%d-%s-rep%d", failoverLogs, n, alg, t.Rep))
		if err != nil {
			if c, ok := r.(*cleanup); ok {
				if kerr := c.keepLogs(kept); kerr != nil {
					err = fmt.Errorf("%w (keeping its servers' logs: %v)", err, kerr)
				} else {
					err = fmt.Errorf("%w (its servers' logs: %s)", err, kept)
				}
			}
			return nil, fmt.Errorf("n=%d: %w", n, err)
		}
		if res.Election != alg {
			return nil, fmt.Errorf("n=%d: the servers run the %s election, not %s", n, res.Election, alg)
		}
		row := ringsim.FailoverRow{Backend: env.Backend, Algorithm: alg, N: n, Rep: t.Rep, Killed: res.Killed, NewCoordinator: res.NewCoordinator,
			NewIsMaxLive: res.NewIsMaxLive, Coordinators: res.Coordinators, Detect: res.Detect, Propagation: res.Propagation,
			AllKnow: res.AllKnow, Metadata: res.Metadata, ElectionMsgs: int(res.Sent["election"]), ElectedMsgs: int(res.Sent["elected"]),
			EndMsgs: int(res.Sent["end"]), Suspect: f.srv.suspect, Seed: t.Seed, ElectedRound: res.ElectedRound, ElectedForward: res.ElectedForward, ElectedAt: res.ElectedAt}
		if c, ok := r.(*cleanup); ok && (!res.NewIsMaxLive || res.Coordinators != 1) {
			if err := c.keepLogs(kept); err != nil {
				return nil, fmt.Errorf("n=%d: keeping the logs of a wrong coordinator: %w", n, err)
			}
			env.Log.Warn("ring-failover: a wrong coordinator; its servers' logs are kept", "n", n, "algorithm", alg, "rep", t.Rep,
				"coordinator", res.NewCoordinator, "coordinators", res.Coordinators, "logs", kept)
		}
		// Bring the killed server back so every repetition sees n servers.
		if err := bringBack(ctx, r, res.Killed, n); err != nil {
			return nil, fmt.Errorf("n=%d: %w", n, err)
		}
		return []ringsim.FailoverRow{row}, nil
	})
}

// killQuiet kills r's coordinator (ringnodes.KillCoordinator) until the
// kill meets a ring that was not electing already, at most three times;
// each disturbed try is logged, its server brought back.
func killQuiet(ctx context.Context, env *experiments.Env, r ringnodes.Ring, n int) (ringnodes.Failover, error) {
	const tries = 3
	for try := 1; ; try++ {
		res, err := ringnodes.KillCoordinator(ctx, r)
		if !errors.Is(err, ringnodes.ErrDisturbed) || try == tries {
			return res, err
		}
		env.Log.Warn("ring-failover: killing the coordinator again", "n", n, "try", try, "err", err)
		if err := bringBack(ctx, r, res.Killed, n); err != nil {
			return res, err
		}
	}
}

// bringBack restarts killed and waits until the ring has its n servers.
func bringBack(ctx context.Context, r ringnodes.Ring, killed string, n int) error {
	if err := r.Restart(ctx, killed); err != nil {
		return fmt.Errorf("restart %s: %w", killed, err)
	}
	if err := ringnodes.WaitMembers(ctx, r.Addrs(), n); err != nil {
		return fmt.Errorf("rejoin: %w", err)
	}
	return nil
}

// The profiles ring-failover keeps of one ringnode (local backend): CPU
// and blocking over profileWindow from just before the first kill in the
// largest ring, on the server with the smallest UID but the coordinator's
// (a fresh ring's coordinator is the server that started it, whatever
// its UID), so it lives through the failover and sees it all.
const (
	// failoverLogs prefixes the folders that keep the servers' logs of a
	// repetition that ended on a wrong coordinator (local backend).
	failoverLogs         = "ring-failover-logs"
	failoverCPUProfile   = "ring-failover-ringnode.cpu.pprof"
	failoverBlockProfile = "ring-failover-ringnode.block.pprof"
	profileWindow        = 3 * time.Second
)

// profileFailover starts both profiles; the channel yields their first
// error once both are written.
func profileFailover(ctx context.Context, env *experiments.Env, r *cleanup) chan error {
	out := make(chan error, 1)
	coord, err := ringnodes.WaitSettled(ctx, r.Addrs(), 20*time.Second)
	if err != nil {
		out <- fmt.Errorf("before profiling: %w", err)
		return out
	}
	addrs := slices.DeleteFunc(r.Addrs(), func(a string) bool { return a == coord })
	target := slices.MinFunc(addrs, func(a, b string) int { return ring.UIDOf(a).Cmp(ring.UIDOf(b)) })
	done := make(chan error, 2)
	for kind, name := range map[string]string{"cpu": failoverCPUProfile, "block": failoverBlockProfile} {
		go func() {
			done <- ringnodes.Profile(ctx, target, r.secret, kind, profileWindow, filepath.Join(env.Dir, name))
		}()
	}
	go func() { out <- errors.Join(<-done, <-done) }()
	return out
}

// The bare token ring is timed three ways per size: busy, its token sent
// round again as soon as it is back (the figure the ≤ 2× target was set
// against); at rest, each trip restGap after the last, so every process
// has fallen idle — as a ring between elections has; and woken, each
// timed trip the second after such a pause, every process woken one trip
// earlier — as an election's ELECTED round meets the ring, each server
// having handled the winner's ELECTION one round before. A message that
// wakes an idle process waits for a core to leave its idle state and for
// cold caches: on this machine the token's hop took twice as long at
// rest.
//
// Each mode's trips are pooled over --bare-rings rings of fresh processes:
// one ring's busy hop is steady within the ring and a draw between rings
// — where its processes land on the two cores — so one ring made the
// baseline, and the ratio to it, a draw (at n = 5, 34.2 and 8.6 µs in two
// runs of one binary: ratios 1.22 and 4.81). The report gives the
// rings' lowest and highest (ringSpread; docs/ringnode.md). The interval
// of the ratio resamples whole rings, so more rings narrow it.
const (
	busyTrips    = 20 // a ring's, back to back
	restTrips    = 5  // a ring's at rest, and woken
	restGap      = 20 * time.Millisecond
	maxBareRings = 1000 // n processes started and stopped 3 times a ring
)

// bareRow is a row of ring-failover-bare.csv: one trip of the bare token
// ring, the physical limit of the same number of processes.
type bareRow struct {
	Backend   string        `csv:"backend"`
	N         int           `csv:"n"`
	Mode      string        `csv:"mode"` // busy, rest or woken
	Ring      int           `csv:"ring"` // which of the mode's --bare-rings rings
	Round     int           `csv:"round"`
	RoundTrip time.Duration `csv:"round_trip_ms"`
	Hop       time.Duration `csv:"hop_ms"`
}

// bare times a token ring of n processes on loopback, busy, at rest and woken,
// before the ringnode ring of that size starts, so they do not share the
// CPU.
func (f *Failover) bare(ctx context.Context, env *experiments.Env, n int) error {
	sink, err := env.CSV("bare", bareRow{})
	if err != nil {
		return err
	}
	for _, m := range []struct {
		mode   string
		rounds int
		gap    time.Duration
		warm   int
	}{{"busy", busyTrips, 0, 0}, {"rest", restTrips, restGap, 0}, {"woken", restTrips, restGap, 1}} {
		for ring := range f.bareRings {
			rtts, err := ringnodes.BareRing(ctx, n, m.rounds, m.gap, m.warm, f.srv.timerSlack, f.srv.monitorAwake)
			if err != nil {
				return err
			}
			for i, d := range rtts {
				if err := sink.Write(bareRow{Backend: env.Backend, N: n, Mode: m.mode, Ring: ring, Round: i, RoundTrip: d, Hop: d / time.Duration(n)}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (f *Failover) Report(in *experiments.ReportInput) (string, error) {
	// On Kubernetes (results/kubernetes, from ringside cluster), the
	// local and compose rings of results/ stand beside.
	var beside string
	if in.Meta.Backend == "kubernetes" {
		merged, parent := in.WithParent()
		if parent != "" {
			cp := *in
			cp.Table, in = merged, &cp
			beside = fmt.Sprintf("The rows of the other backends are those of `../%s`, beside this run's.\n\n", filepath.Base(parent))
		}
	}
	out, err := ringsim.FailoverReport(in, targets)
	if err != nil {
		return "", err
	}
	out = beside + out
	bare, err := in.ExtraTable("bare")
	if err != nil {
		return out + "\n(no bare token ring beside this run: it is measured on the local backend.)\n", nil
	}
	out += bareSection(in.Table, bare, in.Meta.Seed)
	if _, err := os.Stat(filepath.Join(in.Dir, failoverCPUProfile)); err == nil {
		out += fmt.Sprintf("\nWhere a ringnode's time goes: `go tool pprof -top %s` (CPU) and `go tool pprof -top %s` (where it waited), "+
			"%v of the server with the smallest UID from just before the first kill in the largest ring, beside this report; "+
			"that repetition runs under the profilers.\n", failoverCPUProfile, failoverBlockProfile, profileWindow)
	}
	return out, nil
}

// otherModes are the bare ring's modes shown beside busy, in order.
var otherModes = []string{"rest", "woken"}

// bareSection sets ringnode's time per election hop beside the bare token
// ring's, per algorithm. Like for like: the ELECTED round of a ring
// algorithm is one message passed once around the n−1 survivors, as the
// bare ring passes its token, so it costs elected_round / (n−1) per hop;
// the target is judged on it (Bully tells every member directly: no
// round). Per election message: the election's propagation (first
// ELECTION sent → ELECTED back) over its election messages — what each
// message of the algorithm costs, detection skew between the servers
// included, beside the bare hop.
func bareSection(t, bare *experiments.Table, seed uint64) string {
	// p50 per size and mode; a CSV from before the rest and woken modes
	// has busy trips only. The busy trips themselves too, ring by ring: the
	// target's verdict rests on the ratio's bootstrap interval, which
	// resamples whole rings (a CSV from before the rings were pooled: each
	// trip on its own, as then).
	hop := map[[2]string]float64{}
	busy := map[string][][]float64{}
	// How many trips each mode took at a size, and over how many rings
	// the busy ones (the run's --bare-rings; every mode has as many), for
	// the text: the largest of the sizes'.
	tripsOf, ringsOf := map[string]int{}, 1
	for _, g := range bare.GroupBy("backend", "n") {
		for _, rows := range bare.Split(g.Rows, "mode") {
			mode := "busy"
			if bare.Has("mode") {
				mode = bare.Str(rows[0], "mode")
			}
			trips := bare.Floats(rows, "hop_ms")
			hop[[2]string{g.Key[1], mode}] = experiments.Summarize(trips).P50
			tripsOf[mode] = max(tripsOf[mode], len(trips))
			if mode != "busy" {
				continue
			}
			if !bare.Has("ring") {
				busy[g.Key[1]] = append(busy[g.Key[1]], experiments.Singletons(trips)...)
				continue
			}
			rings := bare.Split(rows, "ring")
			ringsOf = max(ringsOf, len(rings))
			for _, ring := range rings {
				busy[g.Key[1]] = append(busy[g.Key[1]], bare.Floats(ring, "hop_ms"))
			}
		}
	}
	var rows [][]string
	for _, g := range t.GroupBy("backend", "algorithm", "n") {
		b, ok := hop[[2]string{g.Key[2], "busy"}]
		n, _ := strconv.Atoi(g.Key[2])
		alg, err := ring.Lookup(g.Key[1])
		if !ok || n < 3 || err != nil {
			continue
		}
		round, ratio, verdict, own := "—", "—", "—", "—"
		elected := math.NaN() // per hop; Bully has no round
		if alg.Topology != ring.Complete {
			rounds := t.Floats(g.Rows, "elected_round_ms")
			elected = experiments.Summarize(rounds).P50 / float64(n-1)
			round, ratio = experiments.Num(elected*1000, 1), experiments.Num(elected/b, 2)
			// 0: no server reported its share (Floats already left out a
			// CSV's from before the column).
			if fw := slices.DeleteFunc(t.Floats(g.Rows, "elected_forward_ms"), func(v float64) bool { return v <= 0 }); len(fw) > 0 {
				own = experiments.Num(experiments.Summarize(fw).P50*1000, 1)
			}
			perHop := make([]float64, len(rounds))
			for i, r := range rounds {
				perHop[i] = r / float64(n-1)
			}
			_, lo, hi := experiments.MedianRatioInterval(experiments.Singletons(perHop), busy[g.Key[2]], seed)
			verdict = "≤ 2× busy: " + experiments.JudgeInterval(lo, hi, 2)
		}
		// The other modes' hops, and the ELECTED hop's ratio to each.
		hops, ratios := make([]string, len(otherModes)), make([]string, len(otherModes))
		for i, mode := range otherModes {
			hops[i], ratios[i] = "—", "—"
			if h, ok := hop[[2]string{g.Key[2], mode}]; ok {
				hops[i] = experiments.Num(h*1000, 1)
				if !math.IsNaN(elected) {
					ratios[i] = experiments.Num(elected/h, 2)
				}
			}
		}
		msgs := max(experiments.Summarize(t.Floats(g.Rows, "election_msgs")).Mean, 1)
		perMsg := experiments.Summarize(t.Floats(g.Rows, "propagation_ms")).P50 / msgs
		if alg.Topology == ring.Complete {
			// Bully's winner, the highest survivor, mostly announces before
			// any ELECTION reaches it (its propagation is 0): its election
			// runs from the first suspicion until every server knows.
			perMsg = experiments.Summarize(elections(t, g.Rows)).P50 / msgs
		}
		row := append(append([]string{g.Key[1], g.Key[2], experiments.Num(b*1000, 1)}, hops...), round, own, ratio)
		rows = append(rows, append(append(row, ratios...), experiments.Num(perMsg*1000, 1), experiments.Num(perMsg/b, 2), verdict))
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n**The physical limit, measured in the same run**: a bare token ring of the same number of processes on loopback " +
		"(`cmd/tokenring`, one 8-byte token forwarded, no election logic, each process with the servers' timer slack; ring-failover-bare.csv; " +
		"each mode's trips pooled over " + strconv.Itoa(ringsOf) + " rings of fresh processes, as one ring's hop depends on where its processes land on the cores), timed *busy* (" + strconv.Itoa(tripsOf["busy"]) +
		" trips back to back, the token sent round again as soon as it is back), *at rest* (" + strconv.Itoa(tripsOf["rest"]) + " trips, each " +
		restGap.String() + " after the last, so every process has fallen idle, as in a ring between elections: waking an idle process costs a core's " +
		"return from its idle state and cold caches) and *woken* (" + strconv.Itoa(tripsOf["woken"]) + " trips, each the second after such a pause: " +
		"every process woken one trip earlier, as an election's ELECTED round meets the ring — each server handled the winner's ELECTION one round before). " +
		"ringnode's time per hop, like for like, is its ELECTED round (one message once around the n−1 survivors: from the winner's read of its own ELECTION back to its read of the ELECTED back) / (n−1), and its own share of it " +
		"the survivors' time from reading the ELECTED to their forward's write returning (their clocks; the rest of a hop is loopback and the next server's wake-up); " +
		"per election message is the election's propagation over its election messages (several travel at once, and the servers' detection instants spread) — " +
		"for Bully, whose winner mostly announces before any ELECTION reaches it, the time from the first suspicion until every server knows, over its election messages. " +
		"The target's verdict rests on the 95 % bootstrap interval of the ratio of medians, which resamples the repetitions one by one and the bare rings whole:\n\n" +
		experiments.MarkdownTable([]string{"algorithm", "n", "bare µs/hop busy (p50)", "bare µs/hop at rest (p50)", "bare µs/hop woken (p50)", "ringnode ELECTED µs/hop",
			"of it in the server: read → forward µs (p50)", "ratio to busy", "ratio at rest", "ratio woken",
			"propagation µs per election message", "ratio to busy", "target (ELECTED)"}, rows) + ringSpread(bare)
}

// ringSpread says how far apart the bare rings of one size were, busy:
// the lowest and highest of their p50 hops ("" for a CSV from before the
// rings were pooled).
func ringSpread(bare *experiments.Table) string {
	if !bare.Has("ring") || !bare.Has("mode") {
		return ""
	}
	var parts []string
	for _, g := range bare.GroupBy("backend", "n", "mode") {
		if g.Key[2] != "busy" {
			continue
		}
		var p50s []float64
		for _, ring := range bare.Split(g.Rows, "ring") {
			p50s = append(p50s, experiments.Summarize(bare.Floats(ring, "hop_ms")).P50)
		}
		if len(p50s) > 1 {
			parts = append(parts, fmt.Sprintf("n = %s %s–%s", g.Key[1], experiments.Num(slices.Min(p50s)*1000, 1), experiments.Num(slices.Max(p50s)*1000, 1)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "\nOne bare ring's busy hop, p50 µs, lowest–highest of the pooled rings: " + strings.Join(parts, ", ") +
		" — where a ring's processes land on the cores sets its hop, so a single ring would make the baseline a draw.\n"
}

// elections is each row's all_know_ms − detect_ms: the election from the
// first suspicion until every server knows the winner.
func elections(t *experiments.Table, rows []int) []float64 {
	var out []float64
	for _, i := range rows {
		if d := t.Float(i, "all_know_ms") - t.Float(i, "detect_ms"); !math.IsNaN(d) {
			out = append(out, d)
		}
	}
	return out
}

// targets states the targets for one ring size: every server
// knowing the new coordinator within the heartbeat timeout + 100 ms at
// p99, and Chang–Roberts' propagation p50 under 5 ms at n = 16 (seed 002's
// algorithm; the others are measured beside it, not held to it).
func targets(alg string, n int, propP50, knowP99, suspect float64) string {
	out := "all know ≤ suspect+100 ms: " + experiments.Verdict(knowP99 <= suspect+100)
	if n == 16 && alg == ring.ChangRoberts {
		out = "propagation < 5 ms: " + experiments.Verdict(propP50 < 5) + "; " + out
	}
	return out
}
