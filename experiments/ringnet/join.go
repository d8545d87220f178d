package ringnet

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

// Join is ring-join: the time to add a server to a running ring, idle
// and under client load.
type Join struct {
	ns      experiments.IntList
	loads   experiments.ChoiceList
	keys    int
	clients int
	srv     serverFlags
}

func (*Join) Spec() experiments.Spec {
	return experiments.Spec{Name: "ring-join", Backends: backends, Quick: 10, Paper: 30, Row: joinRow{},
		Summary: "add a server to a running ringnode ring, idle and under client load: admitted, metadata everywhere, data moved"}
}

func (j *Join) Flags(fs *flag.FlagSet) {
	j.loads = experiments.ChoiceList{Vals: []string{"idle", "loaded"}, Allowed: []string{"idle", "loaded"}}
	fs.Var(&j.ns, "n", "servers before the join, comma-separated (default: 3,8 quick; 3,5,8 paper)")
	fs.Var(&j.loads, "load", "idle, loaded")
	fs.IntVar(&j.keys, "keys", 2000, "pairs stored before the joins (from seed 002's pool shape)")
	fs.IntVar(&j.clients, "clients", 4, "writers during a loaded join")
	j.srv.define(fs)
}

// joinRow is one server joining a ring of n_before.
type joinRow struct {
	Backend    string        `csv:"backend"`
	NBefore    int           `csv:"n_before"`
	Load       string        `csv:"load"`
	Rep        int           `csv:"rep"`
	Server     string        `csv:"server"`
	Admitted   time.Duration `csv:"admitted_ms"`
	Metadata   time.Duration `csv:"metadata_ms"`
	Rebalanced time.Duration `csv:"rebalanced_ms"`
	KeysMoved  int64         `csv:"keys_moved"`
	LoadWrites int           `csv:"load_writes"`
	LoadErrors int           `csv:"load_errors"`
	Seed       uint64        `csv:"seed"`
}

func (j *Join) Run(ctx context.Context, env *experiments.Env) error {
	if j.keys < 1 || j.clients < 1 {
		return fmt.Errorf("keys=%d clients=%d: both must be positive", j.keys, j.clients)
	}
	pool := makePool(env.Seed, PaperPairs, PaperPoolMiB)[:min(j.keys, PaperPairs)]
	ns := experiments.Points(j.ns, env.Profile, experiments.IntList{3, 8}, experiments.IntList{3, 5, 8})
	cells := experiments.Cells(len(ns), len(j.loads.Vals))
	var rings ringPerCell
	defer rings.Close()
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: len(cells)}, func(ctx context.Context, t experiments.Task) ([]joinRow, error) {
		n, load := ns[cells[t.Cell][0]], j.loads.Vals[cells[t.Cell][1]]
		r, err := rings.get(cells[t.Cell][0], func() (ringnodes.Ring, error) {
			r, err := startRing(ctx, env, n, &j.srv)
			if err != nil {
				return nil, err
			}
			if err := preload(ctx, r.Addrs(), pool); err != nil {
				r.Close()
				return nil, err
			}
			return r, nil
		})
		if err != nil {
			return nil, fmt.Errorf("n=%d: %w", n, err)
		}
		row, err := j.once(ctx, env, r, n, load, t, pool)
		if err != nil {
			return nil, fmt.Errorf("n=%d %s: %w", n, load, err)
		}
		return []joinRow{row}, nil
	})
}

func (j *Join) once(ctx context.Context, env *experiments.Env, r ringnodes.Ring, n int, load string, t experiments.Task, pool []pair) (joinRow, error) {
	before, err := ringnodes.StatusAll(ctx, r.Addrs())
	if err != nil {
		return joinRow{}, err
	}
	var bg *background
	if load == "loaded" {
		bg = startLoad(ctx, r.Addrs(), pool, j.clients, t.Seed)
		time.Sleep(200 * time.Millisecond) // let the load reach a steady state
	}
	start := time.Now()
	addr, err := r.Add(ctx)
	if err != nil {
		if bg != nil {
			bg.finish()
		}
		return joinRow{}, err
	}
	admitted := time.Since(start)
	all := r.Addrs()
	// Wait until every server holds metadata with the new server and has
	// finished moving data for it.
	var meta, rebalanced int64
	var moved int64
	err = ringnodes.Poll(ctx, 30*time.Second, func() (bool, error) {
		sts, err := ringnodes.StatusAll(ctx, all)
		if err != nil {
			return false, nil
		}
		meta, rebalanced, moved = 0, 0, 0
		for a, st := range sts {
			if !slices.Contains(st.Servers, addr) || st.Events.RebalanceDone < st.Events.MetaApplied || st.Events.MetaApplied < start.UnixNano() {
				return false, nil
			}
			meta = max(meta, st.Events.MetaApplied)
			rebalanced = max(rebalanced, st.Events.RebalanceDone)
			moved += st.Moved - before[a].Moved
		}
		return true, nil
	})
	writes, errs := 0, 0
	if bg != nil {
		writes, errs = bg.finish()
	}
	if err != nil {
		return joinRow{}, fmt.Errorf("join of %s did not settle: %w; %s", addr, err, ringnodes.Describe(ctx, all))
	}
	row := joinRow{Backend: env.Backend, NBefore: n, Load: load, Rep: t.Rep, Server: addr, Admitted: admitted,
		Metadata: time.Duration(meta - start.UnixNano()), Rebalanced: time.Duration(rebalanced - start.UnixNano()),
		KeysMoved: moved, LoadWrites: writes, LoadErrors: errs, Seed: t.Seed}
	// Take the server out again so every repetition joins a ring of n.
	if err := r.Kill(ctx, addr); err != nil {
		return joinRow{}, err
	}
	if err := ringnodes.WaitMembers(ctx, r.Addrs(), n); err != nil {
		return joinRow{}, fmt.Errorf("removing %s: %w", addr, err)
	}
	return row, ringnodes.WaitQuiet(ctx, r.Addrs())
}

func (j *Join) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	means := map[joinKey]float64{}
	var lines experiments.Lines
	for _, g := range t.GroupBy("backend", "load", "n_before") {
		a := experiments.Summarize(t.Floats(g.Rows, "admitted_ms"))
		m := experiments.Summarize(t.Floats(g.Rows, "metadata_ms"))
		rb := experiments.Summarize(t.Floats(g.Rows, "rebalanced_ms"))
		k := experiments.Summarize(t.Floats(g.Rows, "keys_moved"))
		errs := experiments.Summarize(t.Floats(g.Rows, "load_errors"))
		rows = append(rows, []string{g.Key[0], g.Key[1], g.Key[2], strconv.Itoa(len(g.Rows)),
			experiments.Num(a.Mean, 1), experiments.Num(m.Mean, 1), experiments.Num(m.P99, 1),
			experiments.Num(rb.Mean, 1), experiments.Num(rb.P99, 1), experiments.Num(k.Mean, 0), experiments.Num(errs.Max, 0)})
		n, _ := strconv.Atoi(g.Key[2])
		means[joinKey{g.Key[1], n}] = m.Mean
		y, lo, hi := m.MeanSpread()
		lines.Of(g.Key[1]).Point(float64(n), y, lo, hi)
	}
	fig, err := in.Figure("latency", "join latency", experiments.Line(experiments.Axes{Title: "adding a server (metadata at every server)", X: "servers before the join", Y: "ms (mean ± std)"}, lines.List))
	if err != nil {
		return "", err
	}
	out := experiments.MarkdownTable([]string{"backend", "load", "n before", "reps", "admitted mean ms", "metadata mean ms", "p99",
		"data moved mean ms", "p99", "keys moved", "max failed writes"}, rows)
	out += "\n" + fig + "\n\n"
	out += "*admitted*: process start → the coordinator admitted it and it holds the ring metadata; *metadata*: → every server holds the new ring; " +
		"*data moved*: → every server finished moving keys for the new ring.\n\n"
	if d := loadedMinusIdle(means); d != "" {
		out += "Loaded minus idle (time until every server holds the new ring, mean): " + d +
			". Seed 002 measured adding a server with and without a client and found a 14 ms difference on average.\n"
	}
	return out, nil
}

type joinKey struct {
	load string
	n    int
}

// loadedMinusIdle says, smallest ring first, how much longer a join took
// under load: "3 servers: +4.1 ms, 5 servers: −0.3 ms and 8 servers: +12 ms".
func loadedMinusIdle(means map[joinKey]float64) string {
	var ns []int
	for k := range means {
		if _, idle := means[joinKey{"idle", k.n}]; k.load == "loaded" && idle {
			ns = append(ns, k.n)
		}
	}
	slices.Sort(ns)
	parts := make([]string, len(ns))
	for i, n := range ns {
		d := means[joinKey{"loaded", n}] - means[joinKey{"idle", n}]
		sign := "+"
		if d < 0 {
			sign, d = "−", -d
		}
		parts[i] = fmt.Sprintf("%d servers: %s%s ms", n, sign, experiments.Num(d, 1))
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
