package ringnet

import (
	"context"
	"flag"
	"fmt"

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

func (f *Failover) size(ctx context.Context, env *experiments.Env, n int) error {
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

func (f *Failover) Report(in *experiments.ReportInput) (string, error) {
	return ringexp.FailoverReport(in, targets)
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
