package ringnet

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// KVChaos is kv-chaos, in the style of Jepsen: clients read, write and
// delete a few keys of a ringnode ring while a nemesis kills the
// coordinator, a key's owner or a replica (they restart from their logs),
// pauses servers and, on compose and kubernetes, partitions one off the network; every
// invocation and response is recorded and the history is checked for
// linearizability with Porcupine.
type KVChaos struct {
	servers, keys, clients int
	duration, every, pace  time.Duration
	srv                    serverFlags
}

func (*KVChaos) Spec() experiments.Spec {
	return experiments.Spec{Name: "kv-chaos", Backends: backends, Quick: 3, Paper: 200, Row: kvChaosRow{},
		Summary: "ringnode under a nemesis (kill coordinator / owner / replica, pause; on compose and kubernetes partition one server, and split the ring in two from 2R+3 servers): histories checked for linearizability with Porcupine, acknowledged writes lost"}
}

func (k *KVChaos) Flags(fs *flag.FlagSet) {
	fs.IntVar(&k.servers, "servers", 5, "servers in the ring")
	fs.IntVar(&k.keys, "keys", 8, "keys the clients share")
	fs.IntVar(&k.clients, "clients", 6, "concurrent clients")
	fs.DurationVar(&k.duration, "duration", 6*time.Second, "length of a run's workload")
	fs.DurationVar(&k.every, "fault-every", time.Second, "mean time between faults")
	fs.DurationVar(&k.pace, "pace", 20*time.Millisecond, "pause between one client's operations (a history Porcupine can check in seconds)")
	k.srv.define(fs)
}

// kvChaosRow is one history under faults and its verdict.
type kvChaosRow struct {
	Backend       string        `csv:"backend"`
	Rep           int           `csv:"rep"`
	Seed          uint64        `csv:"seed"`
	Faults        string        `csv:"faults"`
	Ops           int           `csv:"ops"`
	AckedWrites   int           `csv:"acked_writes"`
	UnknownWrites int           `csv:"unknown_writes"`
	Reads         int           `csv:"reads"`
	FailedReads   int           `csv:"failed_reads"`
	LostAcked     int           `csv:"lost_acked_writes"`
	Linearizable  string        `csv:"linearizable"`
	Check         time.Duration `csv:"check_ms"`
	Healed        bool          `csv:"healed"`
}

func (k *KVChaos) Run(ctx context.Context, env *experiments.Env) error {
	if k.servers < 3 || k.keys < 1 || k.clients < 1 || k.duration <= 0 || k.every <= 0 {
		return fmt.Errorf("want servers ≥ 3, keys, clients, duration and fault-every positive")
	}
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: 1}, func(ctx context.Context, t experiments.Task) ([]kvChaosRow, error) {
		row, err := k.run(ctx, env, t.Rep, t.Seed)
		return []kvChaosRow{row}, err
	})
}

// chaosRing is what the nemesis needs of a ring.
type chaosRing interface {
	ringnodes.Ring
	Pause(ctx context.Context, addr string, d time.Duration) error
	Down() []string // killed, not yet restarted
}

// partitioner is a ring that can cut a server off the network (compose,
// kubernetes).
type partitioner interface {
	Partition(ctx context.Context, addr string, d time.Duration) error
}

// splitter is a ring that can cut itself in two, each side still whole
// (compose, kubernetes).
type splitter interface {
	Split(ctx context.Context, group []string, d time.Duration) error
}

// history collects operations from every client.
type history struct {
	mu          sync.Mutex
	t0          time.Time
	ops         []porcupine.Operation
	failedReads int // answered neither 200 nor 404, or not at all: the price of refusing stale reads
}

func (h *history) now() int64 { return time.Since(h.t0).Nanoseconds() }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (k *KVChaos) run(ctx context.Context, env *experiments.Env, rep int, seed uint64) (kvChaosRow, error) {
	r, err := startRing(ctx, env, k.servers, &k.srv)
	if err != nil {
		return kvChaosRow{}, err
	}
	defer r.Close()
	base := r
	if c, ok := r.(*cleanup); ok {
		base = c.Ring
	}
	cr, ok := base.(chaosRing)
	if !ok {
		return kvChaosRow{}, fmt.Errorf("backend %s cannot pause servers", env.Backend)
	}
	h := &history{t0: time.Now()}
	hc := &http.Client{Timeout: 2 * time.Second}
	wctx, stop := context.WithTimeout(ctx, k.duration)
	defer stop()
	var wg sync.WaitGroup
	for c := range k.clients {
		wg.Go(func() { k.client(wctx, cr, hc, h, c, seed) })
	}
	faults := k.nemesis(wctx, cr, seed)
	wg.Wait()

	// Heal: every server back, the ring whole again, then one last read
	// of every key, part of the history.
	healed := true
	if err := restartAll(ctx, cr, k.servers); err != nil {
		// Reported, not fatal: a ring that stays split is a result. Its
		// servers' logs go beside the CSV.
		healed = false
		env.Log.Warn("the ring did not heal", "rep", rep, "err", err)
		if lg, ok := base.(interface {
			Logs(context.Context) (string, error)
		}); ok {
			if out, lerr := lg.Logs(ctx); lerr == nil {
				os.WriteFile(filepath.Join(env.Dir, fmt.Sprintf("kv-chaos-rep%d-logs.txt", rep)), []byte(out), 0o644)
			}
		}
	}
	for key := range k.keys {
		k.do(ctx, cr, hc, h, k.clients, rand.New(rand.NewPCG(seed, 0xf1a1)), opGet, keyName(key), "")
	}

	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, pruneUnread(h.ops), time.Minute)
	checkMS := time.Since(start)
	linearizable := map[porcupine.CheckResult]string{porcupine.Ok: "true", porcupine.Illegal: "false", porcupine.Unknown: "unknown"}[res]
	if res == porcupine.Illegal {
		path := filepath.Join(env.Dir, fmt.Sprintf("kv-chaos-rep%d.html", rep))
		if err := porcupine.VisualizePath(kvModel, info, path); err != nil {
			env.Log.Warn("writing the history's visualisation failed", "err", err)
		} else {
			env.Log.Warn("history not linearizable", "rep", rep, "visualisation", path)
		}
	}
	acked, unknown, reads := 0, 0, 0
	for _, op := range h.ops {
		switch in := op.Input.(kvInput); {
		case in.Op == opGet:
			reads++
		case op.Return == unknownReturn:
			unknown++
		default:
			acked++
		}
	}
	return kvChaosRow{Backend: env.Backend, Rep: rep, Seed: seed, Faults: faults, Ops: len(h.ops), AckedWrites: acked,
		UnknownWrites: unknown, Reads: reads, FailedReads: h.failedReads, LostAcked: lostAcked(h.ops, k.clients),
		Linearizable: linearizable, Check: checkMS, Healed: healed}, nil
}

func keyName(i int) string { return "chaos-" + strconv.Itoa(i) }

// pruneUnread drops the writes of unknown outcome whose value no read
// returned. The verdict is the same with or without them: such a write can
// always be placed after everything else, and a linearization that has it
// anywhere has no read between it and the next write. Without pruning, a
// few hundred open-ended writes make Porcupine's search explode.
func pruneUnread(ops []porcupine.Operation) []porcupine.Operation {
	read := map[[2]string]bool{}
	for _, op := range ops {
		if in, out := op.Input.(kvInput), op.Output; in.Op == opGet {
			if o := out.(kvOutput); o.Found {
				read[[2]string{in.Key, o.Value}] = true
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(ops), func(op porcupine.Operation) bool {
		in := op.Input.(kvInput)
		return in.Op == opPut && op.Return == unknownReturn && !read[[2]string{in.Key, in.Value}]
	})
}

// client issues operations until ctx ends: half writes of unique values,
// four in ten reads, one in ten deletes, each to a random live server.
func (k *KVChaos) client(ctx context.Context, r ringnodes.Ring, hc *http.Client, h *history, c int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(c)+1))
	for seq := 0; ctx.Err() == nil; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.pace):
		}
		key := keyName(rng.IntN(k.keys))
		switch p := rng.IntN(10); {
		case p < 5:
			k.do(ctx, r, hc, h, c, rng, opPut, key, fmt.Sprintf("c%d-%d", c, seq))
		case p < 9:
			k.do(ctx, r, hc, h, c, rng, opGet, key, "")
		default:
			k.do(ctx, r, hc, h, c, rng, opDelete, key, "")
		}
	}
}

// do sends one operation and records it. A write that was not answered
// 204 may or may not have taken effect: it is recorded open-ended. A read
// that was not answered is left out (it changed nothing).
func (k *KVChaos) do(ctx context.Context, r ringnodes.Ring, hc *http.Client, h *history, c int, rng *rand.Rand, op kvOp, key, value string) {
	addrs := r.Addrs()
	if len(addrs) == 0 {
		return
	}
	to := addrs[rng.IntN(len(addrs))]
	method := map[kvOp]string{opPut: http.MethodPut, opGet: http.MethodGet, opDelete: http.MethodDelete}[op]
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), method, "http://"+to+"/kv/"+kv.EscapeKey(key), strings.NewReader(value))
	if err != nil {
		return
	}
	call := h.now()
	resp, err := hc.Do(req)
	ret := h.now()
	in := kvInput{Op: op, Key: key, Value: value}
	var body []byte
	code := 0
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		code = resp.StatusCode
	}
	var opErr *net.OpError
	switch {
	case err != nil && errors.As(err, &opErr) && opErr.Op == "dial":
		// Never delivered (the server is down): it changed nothing.
	case op != opGet && err == nil && code == http.StatusNoContent:
		h.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Return: ret, Output: kvOutput{}})
	case op != opGet:
		h.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Return: unknownReturn, Output: kvOutput{}})
	case err == nil && code == http.StatusOK:
		h.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Return: ret, Output: kvOutput{Value: string(body), Found: true}})
	case err == nil && code == http.StatusNotFound:
		h.add(porcupine.Operation{ClientId: c, Input: in, Call: call, Return: ret, Output: kvOutput{}})
	default:
		h.mu.Lock()
		h.failedReads++
		h.mu.Unlock()
	}
}

// nemesis injects one fault about every k.every until ctx ends, at most
// one server down at a time (the model tolerates R of a key's R+1) or, on
// compose and kubernetes with 2R+3 servers or more, the ring split in two; it returns
// what it did, as kind:count pairs.
func (k *KVChaos) nemesis(ctx context.Context, r chaosRing, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x4e3e))
	counts := map[string]int{}
	part, _ := r.(partitioner)
	split, _ := r.(splitter)
	if k.servers < 2*(k.srv.replicas+1)+1 {
		split = nil // no minority can hold a whole arc: a partition of one is the harder fault
	}
	for {
		wait := time.Duration(float64(k.every) * (0.5 + rng.Float64()))
		select {
		case <-ctx.Done():
			return describeFaults(counts)
		case <-time.After(wait):
		}
		addrs := r.Addrs()
		if len(addrs) < k.servers {
			continue // one down already
		}
		key := keyName(rng.IntN(k.keys))
		kind, target, group := "", "", []string(nil)
		kinds := 4
		if part != nil {
			kinds = 5
		}
		if split != nil {
			kinds = 6
		}
		switch rng.IntN(kinds) {
		case 0:
			kind = "kill-coordinator"
			target, _, _ = ringnodes.Coordinator(ctx, addrs)
		case 1, 2:
			kind = [...]string{"", "kill-owner", "kill-replica"}[rng.IntN(2)+1]
			if st, err := ringnodes.GetStatus(ctx, addrs[0]); err == nil && len(st.Servers) > 0 {
				target = pickResponsible(st.Servers, k.srv.replicas, key, kind == "kill-owner", rng)
			}
		case 3:
			kind, target = "pause", addrs[rng.IntN(len(addrs))]
		case 4:
			kind, target = "partition", addrs[rng.IntN(len(addrs))]
		default:
			if st, err := ringnodes.GetStatus(ctx, addrs[0]); err == nil && len(st.Servers) == k.servers {
				kind, group = "split", minorityFrom(st.Servers, pickResponsible(st.Servers, k.srv.replicas, key, true, rng))
				target = group[0]
			}
		}
		if target == "" || !slices.Contains(addrs, target) {
			continue
		}
		counts[kind]++
		switch kind {
		case "pause":
			r.Pause(ctx, target, 500*time.Millisecond)
			continue
		case "partition":
			// Longer than the detector's timeout, often: the ring removes
			// the server, which must rejoin when the network heals.
			part.Partition(ctx, target, time.Duration(float64(k.srv.suspect)*(0.5+2*rng.Float64())))
			continue
		case "split":
			// The largest minority, ring neighbours from a key's owner:
			// with 2R+3 servers or more it holds every server of that
			// key's arc, which both sides served before the majority rule.
			if err := split.Split(ctx, group, time.Duration(float64(k.srv.suspect)*(0.5+2*rng.Float64()))); err != nil && ctx.Err() == nil {
				// Not root on the Docker host, say: no split took, and
				// none is counted or tried again.
				slog.Warn("kv-chaos: cannot split the ring; going on without splits", "err", err)
				if counts[kind]--; counts[kind] == 0 {
					delete(counts, kind)
				}
				split = nil
			}
			continue
		}
		if r.Kill(ctx, target) == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			r.Restart(context.WithoutCancel(ctx), target)
		}
	}
}

// minorityFrom is the largest minority of servers (in ring order): the
// ring neighbours from first on.
func minorityFrom(servers []string, first string) []string {
	i := max(slices.Index(servers, first), 0)
	out := make([]string, (len(servers)-1)/2)
	for j := range out {
		out[j] = servers[(i+j)%len(servers)]
	}
	return out
}

// pickResponsible is the owner of key, or one of its replicas, on a ring
// of servers (the status lists them in ring order).
func pickResponsible(servers []string, replicas int, key string, owner bool, rng *rand.Rand) string {
	meta, err := membership.New(1, 1, servers[0], replicas, servers)
	if err != nil {
		return ""
	}
	resp := meta.Responsible(key)
	if owner || len(resp) < 2 {
		return resp[0]
	}
	return resp[1+rng.IntN(len(resp)-1)]
}

func describeFaults(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, counts[k]))
	}
	return strings.Join(parts, ";")
}

// restartAll brings every killed server back and waits for the ring.
func restartAll(ctx context.Context, r chaosRing, n int) error {
	for _, a := range r.Down() {
		if err := r.Restart(ctx, a); err != nil {
			return err
		}
	}
	return ringnodes.WaitMembers(ctx, r.Addrs(), n)
}

// lostAcked counts keys whose final read (client c's) shows none of the
// writes that could have been the last: acknowledged writes must survive.
func lostAcked(ops []porcupine.Operation, final int) int {
	lost := 0
	byKey := map[string][]porcupine.Operation{}
	finals := map[string]porcupine.Operation{}
	for _, op := range ops {
		in := op.Input.(kvInput)
		switch {
		case op.ClientId == final:
			finals[in.Key] = op
		case in.Op != opGet:
			byKey[in.Key] = append(byKey[in.Key], op)
		}
	}
	for key, f := range finals {
		out := f.Output.(kvOutput)
		writes := byKey[key]
		ok := len(writes) == 0 && !out.Found
		for _, w := range writes {
			// w could be last unless an acknowledged write began after it ended.
			superseded := slices.ContainsFunc(writes, func(o porcupine.Operation) bool {
				return o.Return != unknownReturn && o.Call > w.Return
			})
			in := w.Input.(kvInput)
			if !superseded && (in.Op == opPut && out.Found && out.Value == in.Value || in.Op == opDelete && !out.Found) {
				ok = true
			}
		}
		if !ok {
			lost++
		}
	}
	return lost
}

func (*KVChaos) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	all := make([]int, len(t.Rows))
	for i := range all {
		all[i] = i
	}
	notLin := t.Count(all, "linearizable", "false")
	unhealed := len(all) - t.Count(all, "healed", "true")
	unknown := t.Count(all, "linearizable", "unknown")
	lost := 0
	for _, v := range t.Floats(all, "lost_acked_writes") {
		lost += int(v)
	}
	ops := experiments.Summarize(t.Floats(all, "ops"))
	acked := experiments.Summarize(t.Floats(all, "acked_writes"))
	unk := experiments.Summarize(t.Floats(all, "unknown_writes"))
	reads := experiments.Summarize(t.Floats(all, "reads"))
	failed := experiments.Summarize(t.Floats(all, "failed_reads"))
	check := experiments.Summarize(t.Floats(all, "check_ms"))
	faults := map[string]int{}
	for _, i := range all {
		for _, f := range strings.Split(t.Str(i, "faults"), ";") {
			if kind, n, ok := strings.Cut(f, ":"); ok {
				c, _ := strconv.Atoi(n)
				faults[kind] += c
			}
		}
	}
	out := fmt.Sprintf("**%d runs: %d not linearizable, %d undecided by the checker, %d acknowledged writes lost** (goal: 0 and 0); "+
		"%d runs whose ring was not whole again 15 s after the faults stopped (their logs beside the CSV).\n\n",
		len(all), notLin, unknown, lost, unhealed)
	out += experiments.MarkdownTable([]string{"ops per run (mean)", "acknowledged writes", "unknown outcome", "reads answered", "reads refused", "check ms p50", "check ms max"},
		[][]string{{experiments.Num(ops.Mean, 0), experiments.Num(acked.Mean, 0), experiments.Num(unk.Mean, 0),
			experiments.Num(reads.Mean, 0), experiments.Num(failed.Mean, 0), experiments.Num(check.P50, 0), experiments.Num(check.Max, 0)}})
	out += "\nFaults injected over all runs: " + describeFaults(faults) + ". "
	out += "Each run: clients write unique values, read and delete a few shared keys at random servers while the nemesis kills " +
		"the coordinator, a key's owner or a replica (restarted from its log a second later), pauses a server for 500 ms (on kubernetes SIGSTOP from the Pod's fault agent) or — on compose and kubernetes — " +
		"cuts one off the network for 0.5–2.5 detector timeouts (docker network disconnect; on kubernetes blackhole routes in its Pod to every other server and the clients, " +
		"and in theirs to it; it keeps running and rejoins when healed), one server at a time, " +
		"or, from 2R+3 servers, splits the ring in two for as long: the largest minority, ring neighbours from a key's owner, so that side holds every server of an arc " +
		"(blackhole routes in each server's network namespace; clients still reach both sides) — which both sides served before ownership changes needed a majority (docs/ringnode.md, \"Partitions\"); " +
		"then every server comes back and every key is read once more. A write answered anything but 204 may or may not have taken effect and is " +
		"checked as such; a read refused (503 while the owner or a replica is unreachable, or no answer in 2 s) is the availability " +
		"the store gives up so as never to serve a stale value. Porcupine (Athalye) checks each key's history against a register; a run that fails leaves kv-chaos-repN.html beside the CSV.\n"
	return out, nil
}
