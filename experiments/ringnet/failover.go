package ringnet

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/experiments/ringexp"
)

// Failover is ring-failover: SIGKILL the coordinator, time detection,
// election propagation and the moment every server knows the new one.
type Failover struct {
	ns  experiments.IntList
	srv serverFlags
}

func (*Failover) Spec() experiments.Spec {
	return experiments.Spec{Name: "ring-failover", Backends: backends, Quick: 20,
		Summary: "SIGKILL the coordinator of a ringnode ring: detection, election propagation, all servers know the new coordinator"}
}

func (f *Failover) Flags(fs *flag.FlagSet) {
	f.ns = experiments.IntList{3, 5, 8, 12, 16}
	fs.Var(&f.ns, "n", "ring sizes, comma-separated")
	f.srv.define(fs)
}

func (*Failover) Columns() []string { return ringexp.FailoverColumns }

func (f *Failover) Run(ctx context.Context, env *experiments.Env) error {
	for _, n := range f.ns {
		if n < 2 {
			return fmt.Errorf("n=%d: a failover needs at least 2 servers", n)
		}
	}
	env.Progress.SetTotal(len(f.ns) * env.Reps)
	for _, n := range f.ns {
		if err := f.size(ctx, env, n); err != nil {
			return fmt.Errorf("n=%d: %w", n, err)
		}
	}
	return nil
}

// bareRounds is how many trips the bare token ring is timed for per size.
const bareRounds = 200

// bareColumns is the header of ring-failover-bare.csv: the bare token
// ring's trips, the physical limit of the same number of processes.
var bareColumns = []string{"backend", "n", "round", "round_trip_ms", "hop_ms"}

func (f *Failover) size(ctx context.Context, env *experiments.Env, n int) error {
	if env.Backend == "local" {
		if err := f.bare(ctx, env, n); err != nil {
			return err
		}
	}
	r, err := startRing(ctx, env, n, &f.srv)
	if err != nil {
		return err
	}
	defer r.Close()
	for rep := range env.Reps {
		res, err := ringnodes.KillCoordinator(ctx, r)
		if err != nil {
			return fmt.Errorf("rep %d: %w", rep, err)
		}
		if err := env.Emit(experiments.Row{env.Backend, n, rep, res.Killed, res.NewCoordinator, res.NewIsMaxLive, res.Coordinators,
			res.Detect, res.Propagation, res.AllKnow, res.Metadata,
			res.Sent["election"], res.Sent["elected"], res.Sent["end"], f.srv.suspect, env.Seed}); err != nil {
			return err
		}
		// Bring the killed server back so every repetition sees n servers.
		if err := r.Restart(ctx, res.Killed); err != nil {
			return fmt.Errorf("rep %d: restart %s: %w", rep, res.Killed, err)
		}
		if err := ringnodes.WaitMembers(ctx, r.Addrs(), n); err != nil {
			return fmt.Errorf("rep %d: rejoin: %w", rep, err)
		}
		env.Progress.Add(1)
	}
	return nil
}

// bare times a token ring of n processes on loopback, before the ringnode
// ring of that size starts, so they do not share the CPU.
func (f *Failover) bare(ctx context.Context, env *experiments.Env, n int) error {
	rtts, err := ringnodes.BareRing(ctx, n, bareRounds)
	if err != nil {
		return err
	}
	sink, err := env.CSV("bare", bareColumns)
	if err != nil {
		return err
	}
	for i, d := range rtts {
		if err := sink.Write(experiments.Row{env.Backend, n, i, d, d / time.Duration(n)}); err != nil {
			return err
		}
	}
	return nil
}

func (f *Failover) Report(in *experiments.ReportInput) (string, error) {
	out, err := ringexp.FailoverReport(in, targets)
	if err != nil {
		return "", err
	}
	bare, err := in.ExtraTable("bare")
	if err != nil {
		return out + "\n(no bare token ring beside this run: it is measured on the local backend.)\n", nil
	}
	return out + bareSection(in.Table, bare), nil
}

// bareSection sets ringnode's time per election hop beside the bare token
// ring's. The election's critical path from the first ELECTION to ELECTED
// back at the winner is about 2(n−1) hops on the n−1 survivors (the max
// UID's ELECTION around the ring, then its ELECTED), so one hop costs
// propagation / 2(n−1).
func bareSection(t, bare *experiments.Table) string {
	hop := map[string]float64{}
	for _, g := range bare.GroupBy("backend", "n") {
		hop[g.Key[1]] = experiments.Summarize(bare.Floats(g.Rows, "hop_ms")).P50
	}
	var rows [][]string
	for _, g := range t.GroupBy("backend", "n") {
		b, ok := hop[g.Key[1]]
		n, _ := strconv.Atoi(g.Key[1])
		if !ok || n < 3 {
			continue
		}
		p := experiments.Summarize(t.Floats(g.Rows, "propagation_ms")).P50
		per := p / float64(2*(n-1))
		ratio := per / b
		rows = append(rows, []string{g.Key[1], experiments.Num(p, 2), experiments.Num(per*1000, 1), experiments.Num(b*1000, 1),
			experiments.Num(ratio, 2), "≤ 2×: " + experiments.Verdict(ratio <= 2)})
	}
	if len(rows) == 0 {
		return ""
	}
	return "\n**The physical limit, measured in the same run**: a bare token ring of the same number of processes on loopback " +
		"(`cmd/tokenring`, one 8-byte token forwarded, no election logic; " + strconv.Itoa(bareRounds) + " trips per size, ring-failover-bare.csv) " +
		"against ringnode's time per election hop, propagation / 2(n−1):\n\n" +
		experiments.MarkdownTable([]string{"n", "propagation p50 ms", "ringnode µs/hop", "bare ring µs/hop (p50)", "ratio", "target"}, rows)
}

// targets states the targets for one ring size: propagation p50
// under 5 ms at n = 16, and every server knowing the new coordinator within
// the heartbeat timeout + 100 ms at p99.
func targets(n int, propP50, knowP99, suspect float64) string {
	out := "all know ≤ suspect+100 ms: " + experiments.Verdict(knowP99 <= suspect+100)
	if n == 16 {
		out = "propagation < 5 ms: " + experiments.Verdict(propP50 < 5) + "; " + out
	}
	return out
}
