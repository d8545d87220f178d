package kubeexp

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// SplitBrain is kube-split-brain: the failures that leave two replicas
// acting as leader at once — a paused leader, a slow clock, a leader cut
// off from the API server, renewals that overrun their deadline —
// provoked on the leader of a leader-based application (leaderapp) under
// write load, with fencing off and on. What counts is what the
// application did, from its own log of applied writes, not what the
// electors said.
type SplitBrain struct {
	faults   experiments.ChoiceList
	algs     experiments.ChoiceList
	fencing  experiments.ChoiceList
	lengths  experiments.FloatList
	rates    experiments.FloatList
	lease    string
	replicas int
	writers  int
	k        kubeFlags
}

// Faults on the leader.
const (
	faultPause     = "pause"     // its elector and application SIGSTOPped, then SIGCONTinued
	faultPartition = "partition" // its elector loses the API server
	faultSkew      = "skew"      // its elector's clock runs at --rate, and it loses the API server
	faultOverrun   = "overrun"   // its elector's requests held past the renew deadline
)

var allFaults = []string{faultPause, faultPartition, faultSkew, faultOverrun}

func (*SplitBrain) Spec() experiments.Spec {
	return experiments.Spec{Name: "kube-split-brain", Backends: backends, Quick: 1, Paper: 10, Row: splitRow{},
		Summary: "two leaders at once: pause, clock rate skew, API partition and renew overrun on the leader of leaderapp, fencing off and on"}
}

func (s *SplitBrain) Flags(fs *flag.FlagSet) {
	s.faults = experiments.ChoiceList{Vals: []string{faultPause, faultSkew}, Allowed: allFaults}
	s.algs = experiments.ChoiceList{Vals: []string{balance.Default, balance.BLD}, Allowed: balance.Algorithms}
	s.fencing = experiments.ChoiceList{Vals: []string{"off", "on"}, Allowed: []string{"off", "on"}}
	s.lengths = experiments.FloatList{2}
	s.rates = experiments.FloatList{0.5}
	fs.Var(&s.faults, "fault", "faults on the leader: pause (elector and application SIGSTOPped), partition (the elector loses the API server), "+
		"skew (its clock at --rate, and it loses the API server), overrun (its requests held renew deadline + retry)")
	fs.Var(&s.algs, "algorithms", "election algorithms (skew needs one of ringside's electors: the default is client-go's, whose clock is not injectable)")
	fs.Var(&s.fencing, "fencing", "the application's fencing: off (followers trust their sidecar), on (writes carry the Lease's term)")
	fs.Var(&s.lengths, "length", "how long each fault lasts, in lease durations")
	fs.Var(&s.rates, "rate", "skew: the leader's clock rate (0.5: its seconds last two real ones)")
	fs.StringVar(&s.lease, "lease", "short", "lease profile: short (2 s, renew 1.5 s, retry 0.5 s) or 10s (10 s, 8 s, 2 s)")
	fs.IntVar(&s.replicas, "replicas", 3, "replicas of the application")
	fs.IntVar(&s.writers, "writers", 3, "clients writing at once, each to every replica in turn")
	s.k.define(fs, true)
}

// splitCell is one configuration.
type splitCell struct {
	fault   string
	length  float64 // leases
	rate    float64 // skew only
	alg     string
	fencing bool
}

func (s *SplitBrain) cells() []splitCell {
	var out []splitCell
	for _, f := range s.faults.Vals {
		rates := []float64{1}
		if f == faultSkew {
			rates = s.rates
		}
		for _, l := range s.lengths {
			for _, r := range rates {
				for _, a := range s.algs.Vals {
					if f == faultSkew && a == balance.Default {
						continue // client-go's elector reads the real clock
					}
					for _, fe := range s.fencing.Vals {
						out = append(out, splitCell{fault: f, length: l, rate: r, alg: a, fencing: fe == "on"})
					}
				}
			}
		}
	}
	return out
}

// splitRow is one fault on one leader.
type splitRow struct {
	Backend   string        `csv:"backend"`
	Fault     string        `csv:"fault"`
	FaultLen  time.Duration `csv:"fault_ms"`
	Rate      float64       `csv:"clock_rate"`
	Algorithm string        `csv:"algorithm"`
	Fencing   string        `csv:"fencing"`
	LeaseS    int           `csv:"lease_s"`
	Rep       int           `csv:"rep"`
	Victim    string        `csv:"victim"`
	Successor string        `csv:"successor"`
	// The two leaders' overlap as measured, and as the lease timing
	// predicts it (predictOverlap).
	Overlap         time.Duration `csv:"overlap_ms"`
	PredictedLo     time.Duration `csv:"predicted_lo_ms"`
	PredictedHi     time.Duration `csv:"predicted_hi_ms"`
	StaleLeader     int           `csv:"stale_leader_writes"`
	StaleAccepted   int           `csv:"stale_accepted"`
	FenceViolations int           `csv:"fence_violations"`
	Acked           int           `csv:"acked"`
	DroppedAcked    int           `csv:"acked_dropped"`
	LostAcked       int           `csv:"lost_acked"`
	SingleLeader    time.Duration `csv:"single_leader_ms"`
	Seed            uint64        `csv:"seed"`
}

// predictOverlap is how long the lease timing lets the victim act as
// leader after its successor began, from three facts. The victim's
// sidecar names it until a renew deadline after its last renewal t, by
// its own clock: t + Renew/rate in real time (bld.Candidate.LeaderTerm).
// The followers see a renewal only when the record's bytes change, and
// the record carries its renewTime in whole seconds of the leader's clock
// (client-go's LeaseLock hands the elector a metav1.Time): the last change
// they saw is up to 1 s/rate before t. The successor takes over a lease
// after that, plus up to a retry period. So the overlap lies between
// Renew/rate − Lease − Retry and Renew/rate + 1 s/rate − Lease (none
// below 0), and each application sees each end up to a poll late — the
// successor's start late shortens what the logs show, the victim's end
// late lengthens it — so a poll widens the range on both sides. A pause
// longer than the renew deadline leaves nothing: the woken sidecar's
// deadline has passed. Under cle-balanced no follower takes the lease
// itself: the controller names the successor once it has seen the lease
// expire and asked the candidates whether they are there, a wait with no
// bound but the controller's, so the overlap may be anything down to 0.
func predictOverlap(c splitCell, t kube.Timing) (lo, hi time.Duration) {
	if c.fault == faultPause {
		return 0, appPoll
	}
	rate := 1.0
	if c.fault == faultSkew {
		rate = c.rate
	}
	stepDown := time.Duration(float64(t.Renew) / rate)
	tick := time.Duration(float64(time.Second) / rate)
	lo, hi = max(0, stepDown-t.Lease-t.Retry-appPoll), max(0, stepDown+tick-t.Lease)+appPoll
	if c.alg == balance.CLEBalanced {
		lo = 0
	}
	return lo, hi
}

func (s *SplitBrain) Run(ctx context.Context, env *experiments.Env) error {
	t, ok := profiles[s.lease]
	if !ok {
		return fmt.Errorf("--lease %q: want short or 10s", s.lease)
	}
	if s.replicas < 3 || s.replicas > 9 {
		return fmt.Errorf("--replicas %d: want 3 to 9 (a stale leader needs a successor and a follower to mislead)", s.replicas)
	}
	if s.writers < 1 || s.writers > 32 {
		return fmt.Errorf("--writers %d: want 1 to 32", s.writers)
	}
	for _, l := range s.lengths {
		if !(l > 0 && l <= 10) { // NaN too
			return fmt.Errorf("--length %v: want more than 0 and at most 10 leases", l)
		}
	}
	for _, r := range s.rates {
		if !(r >= 0.1 && r <= 10) {
			return fmt.Errorf("--rate %v: want a clock rate from 0.1 to 10", r)
		}
	}
	cells := s.cells()
	if len(cells) == 0 {
		return fmt.Errorf("no configuration to run: skew needs an algorithm other than %s", balance.Default)
	}
	c, err := start(ctx, env, &s.k)
	if err != nil {
		return err
	}
	defer c.Close()
	grid := experiments.Grid{Cells: len(cells), Parallel: s.k.parallelism(env.Backend), Cost: func(int) int { return 2 * s.replicas }}
	return experiments.RunGrid(ctx, env, grid, func(ctx context.Context, tk experiments.Task) ([]splitRow, error) {
		cell := cells[tk.Cell]
		// Each run of once deploys into a fresh namespace, so a
		// repetition whose victim lost the lead early, or whose
		// container the runtime failed to start, can be run again whole.
		attrs := []any{"experiment", "kube-split-brain", "cell", cell.String(), "rep", tk.Rep}
		row, err := againOnFailedStart(env, func() (splitRow, error) {
			return againOn(env, errLeadMoved, setupTries, "kube-split-brain: setting the repetition up again",
				func() (splitRow, error) { return s.once(ctx, c, env.Backend, cell, t) }, attrs...)
		}, attrs...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cell, err)
		}
		row.Backend, row.Rep, row.Seed = env.Backend, tk.Rep, tk.Seed
		return []splitRow{row}, nil
	})
}

// setupTries bounds how often a repetition is set up again when its
// victim lost the lead before the fault (errLeadMoved).
const setupTries = 3

// once runs one repetition of cell.
func (s *SplitBrain) once(ctx context.Context, c *kube.Cluster, backend string, cell splitCell, t kube.Timing) (splitRow, error) {
	newRun := newSplitProcs
	if backend == kube.BackendPods {
		newRun = newSplitPods
	}
	r, err := newRun(ctx, c, cell, s.replicas, t)
	if err != nil {
		return splitRow{}, err
	}
	defer r.reps.close()
	if err := r.reps.start(ctx); err != nil {
		return splitRow{}, err
	}
	stop := make(chan struct{})
	wait := r.writers(s.writers, stop)
	length := time.Duration(cell.length * float64(t.Lease))
	// A lease of load before the fault; after it, long enough for a
	// successor to take over and the victim to learn it.
	time.Sleep(t.Lease)
	if err := followVictim(ctx, r.pods, r.url, &http.Client{Transport: r.hc.Transport, Timeout: time.Second}); err != nil {
		close(stop)
		wait()
		return splitRow{}, err
	}
	at := time.Now()
	ferr := r.inject(ctx, length)
	time.Sleep(t.Lease + 4*t.Retry)
	close(stop)
	acked := wait()
	if ferr != nil {
		return splitRow{}, ferr
	}
	final, err := r.final(ctx, s.writers)
	if err != nil {
		return splitRow{}, err
	}
	logs, err := r.reps.stopApps(ctx)
	if err != nil {
		return splitRow{}, err
	}
	v := judge(logs, at, r.victim())
	lo, hi := predictOverlap(cell, t)
	fencing := "off"
	if cell.fencing {
		fencing = "on"
	}
	return splitRow{Fault: cell.fault, FaultLen: length, Rate: cell.rate, Algorithm: cell.alg, Fencing: fencing, LeaseS: int(t.Lease / time.Second),
		Victim: r.victim(), Successor: v.Successor, Overlap: v.Overlap, PredictedLo: lo, PredictedHi: hi,
		StaleLeader: v.StaleLeader, StaleAccepted: v.StaleAccepted, FenceViolations: v.FenceViolations,
		Acked: len(acked), DroppedAcked: droppedAcked(acked, logs), LostAcked: lostAcked(acked, final), SingleLeader: v.SingleLeader}, r.reps.crashed()
}

func (s *SplitBrain) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var lines experiments.Lines
	fencedBad, unfencedHazard := 0, 0
	for _, g := range t.GroupBy("fault", "fault_ms", "clock_rate", "algorithm", "fencing") {
		fault, rate, alg, fencing := g.Key[0], g.Key[2], g.Key[3], g.Key[4]
		ov := experiments.Summarize(t.Floats(g.Rows, "overlap_ms"))
		sum := func(col string) int {
			n := 0
			for _, v := range t.Floats(g.Rows, col) {
				n += int(v)
			}
			return n
		}
		lo, hi := experiments.Summarize(t.Floats(g.Rows, "predicted_lo_ms")), experiments.Summarize(t.Floats(g.Rows, "predicted_hi_ms"))
		single := experiments.Summarize(t.Floats(g.Rows, "single_leader_ms"))
		stale, accepted, violations := sum("stale_leader_writes"), sum("stale_accepted"), sum("fence_violations")
		dropped, lost := sum("acked_dropped"), sum("lost_acked")
		target := ""
		if fencing == "on" {
			ok := violations == 0 && dropped == 0 && lost == 0
			target = "0 fence violations, 0 acknowledged writes dropped or lost: " + experiments.Verdict(ok)
			if !ok {
				fencedBad++
			}
		} else if ov.Max > 0 || dropped > 0 || lost > 0 || stale > 0 {
			unfencedHazard++
		}
		label := fault
		if fault == faultSkew {
			label += " ×" + rate
		}
		rows = append(rows, []string{label, experiments.Num(t.Float(g.Rows[0], "fault_ms")/1000, 1) + " s", alg, fencing, strconv.Itoa(ov.N),
			experiments.Num(ov.P50, 0), experiments.Num(ov.Max, 0), experiments.Num(lo.Min, 0) + "–" + experiments.Num(hi.Max, 0),
			strconv.Itoa(stale), strconv.Itoa(accepted), strconv.Itoa(violations), strconv.Itoa(dropped), strconv.Itoa(lost), strconv.Itoa(sum("acked")),
			experiments.Num(single.P50, 0), target})
		if fencing == "off" {
			x := t.Float(g.Rows[0], "fault_ms") / 1000
			if fault == faultSkew {
				x, _ = strconv.ParseFloat(rate, 64)
			}
			y, l, h := ov.MedianSpread()
			lines.Of(label+" "+alg).Point(x, y, l, h)
		}
	}
	fig := ""
	if len(lines.List) > 0 {
		var err error
		fig, err = in.Figure("overlap", "overlap of two acting leaders", experiments.Line(experiments.Axes{
			Title: "two leaders acting at once, fencing off (p50, p10–p90)", X: "fault length (s), or clock rate for skew", Y: "overlap (ms)"}, lines.List))
		if err != nil {
			return "", err
		}
	}
	out := experiments.MarkdownTable([]string{"fault", "length", "algorithm", "fencing", "reps", "overlap p50 ms", "overlap max ms", "predicted ms",
		"stale leader writes", "stale writes accepted", "fence violations", "acked writes dropped", "acked writes lost at the end", "acked writes", "single leader after ms", "target"}, rows)
	out += "\n" + fig + "\n\n"
	out += fmt.Sprintf("Configurations with fencing on that missed the target: %d. Configurations with fencing off in which two replicas acted as leader, "+
		"a stale leader's write was applied, or an acknowledged write was lost: %d.\n\n", fencedBad, unfencedHazard)
	out += "client-go documents that its leader election \"does not guarantee that only one client is acting as a leader (a.k.a. fencing)\", " +
		"tolerates clock offset but not clock rate skew, and that ReleaseOnCancel can leave two processes on the critical path. " +
		"*Overlap* is measured from the application's own log of applied writes: the time two replicas both applied writes as leader. " +
		"*Stale* writes are those a leader applied, or a follower took from it, after a newer term's leader had applied its first write. " +
		"*Fence violations* are writes a replica applied after it had already applied a newer term's — what fencing forbids. " +
		"*Dropped* counts acknowledged writes a replica answered for without applying, because it held a write of the key another leader had numbered as high — a deposed one's, without fencing; " +
		"*lost at the end* counts (replica, key) pairs whose final value is older than the key's last acknowledged write (the writers keep overwriting their keys, so most drops are overwritten by then). " +
		"The prediction: a leader's sidecar names it until a renew deadline after its last renewal by its own clock (renew ÷ rate of real time); " +
		"the followers see a renewal only when the record changes, and its renewTime is in whole seconds of the leader's clock, so their last sighting is up to 1 s ÷ rate older; " +
		"the successor takes over a lease after that sighting, plus up to a retry period: overlap between renew ÷ rate − lease − retry and renew ÷ rate + 1 s ÷ rate − lease, " +
		"widened by a poll of the applications' sidecars (50 ms) on each side. " +
		"Under cle-balanced the controller, not a follower, names the successor, after it has seen the lease expire and asked the candidates: the lower bound is 0 there. " +
		"A pause longer than the renew deadline leaves none. See docs/split-brain.md.\n"
	return out, nil
}

// String names a cell in errors.
func (c splitCell) String() string {
	parts := []string{c.fault, c.alg, "fencing=" + strconv.FormatBool(c.fencing)}
	if c.fault == faultSkew {
		parts = append(parts, "rate="+strconv.FormatFloat(c.rate, 'g', -1, 64))
	}
	return strings.Join(parts, " ")
}
