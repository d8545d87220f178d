package lbexp

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
)

type cellStats struct {
	workload, target string
	clients          int
	n, ok            int
	rps              float64
	lat              experiments.Summary
	share            map[string]float64
}

func liveStats(t *experiments.Table) []cellStats {
	var out []cellStats
	for _, g := range t.GroupBy("workload", "target", "clients") {
		c := cellStats{workload: g.Key[0], target: g.Key[1], share: map[string]float64{}}
		c.clients, _ = strconv.Atoi(g.Key[2])
		var lats []float64
		end := 0.0
		reps := map[string]bool{}
		for _, i := range g.Rows {
			c.n++
			reps[t.Str(i, "rep")] = true
			end = max(end, t.Float(i, "start_ms")+t.Float(i, "latency_ms"))
			if t.Str(i, "status") == "200" {
				c.ok++
				lats = append(lats, t.Float(i, "latency_ms"))
				c.share[t.Str(i, "worker")]++
			}
		}
		for w := range c.share {
			c.share[w] /= float64(max(c.ok, 1))
		}
		if end > 0 {
			c.rps = float64(c.ok) / (end / 1000) / float64(len(reps))
		}
		c.lat = experiments.Summarize(lats)
		out = append(out, c)
	}
	return out
}

func (l *Live) Report(in *experiments.ReportInput) (string, error) {
	stats := liveStats(in.Table)
	var workers []string
	for _, c := range stats {
		for w := range c.share {
			if !slices.Contains(workers, w) {
				workers = append(workers, w)
			}
		}
	}
	sort.Strings(workers)
	var rows [][]string
	var proxy = map[string]cellStats{}
	for _, c := range stats {
		shares := make([]string, len(workers))
		for i, w := range workers {
			shares[i] = experiments.Num(100*c.share[w], 1)
		}
		rows = append(rows, []string{c.workload, c.target, strconv.Itoa(c.clients), strconv.Itoa(c.n), strconv.Itoa(c.n - c.ok),
			experiments.Num(c.rps, 0), experiments.Num(c.lat.P50, 2), experiments.Num(c.lat.P99, 2), strings.Join(shares, " / ")})
		if c.workload == WorkloadProxy {
			proxy[c.target] = c
		}
	}
	out := experiments.MarkdownTable([]string{"workload", "target", "clients", "requests", "failed", "req/s", "p50 ms", "p99 ms",
		"share % (" + strings.Join(workers, " / ") + ")"}, rows)

	if wr, ok := proxy[pick.WeightedRandom]; ok {
		out += "\n**Proxy overhead** (proxy workload, near-free requests, " + strconv.Itoa(wr.clients) + " clients):"
		if ng, ok := proxy[TargetNginx]; ok && ng.rps > 0 {
			out += fmt.Sprintf(" balancer throughput = **%s × nginx's** (%s vs %s req/s; target ≥ 0.7);",
				experiments.Num(wr.rps/ng.rps, 2), experiments.Num(wr.rps, 0), experiments.Num(ng.rps, 0))
		}
		if d, ok := proxy[TargetDirect]; ok {
			out += fmt.Sprintf(" added p99 latency over direct = **%s ms** (%s vs %s ms; target ≤ 1 ms).",
				experiments.Num(wr.lat.P99-d.lat.P99, 2), experiments.Num(wr.lat.P99, 2), experiments.Num(d.lat.P99, 2))
		}
		out += " Load generator, proxies and workers share this machine's cores.\n"
	}

	out += throttledReport(stats)

	// Utilisation over time (seed 004 Figure 3) and the agent's events.
	samples, err := in.ExtraTable(samplesCSV)
	if err == nil {
		var series []experiments.Series
		idx := map[string]int{}
		for i := range samples.Rows {
			w := samples.Str(i, "worker")
			k, ok := idx[w]
			if !ok {
				k = len(series)
				idx[w] = k
				series = append(series, experiments.Series{Name: w})
			}
			series[k].X = append(series[k].X, samples.Float(i, "t_ms")/1000)
			series[k].Y = append(series[k].Y, samples.Float(i, "cpu_pct"))
		}
		fig, err := in.Figure("utilisation", "utilisation over time",
			experiments.Line(experiments.Axes{Title: "worker CPU utilisation over time (% of its limit)", X: "s since start", Y: "CPU %"}, series))
		if err != nil {
			return "", err
		}
		out += "\n" + fig + "\n"
	} else {
		out += fmt.Sprintf("\n(no %s beside the CSV: %v)\n", SamplesFile, err)
	}
	if ev, err := in.ExtraTable(eventsCSV); err == nil {
		counts := map[string]int{}
		var kinds []string
		for i := range ev.Rows {
			k := ev.Str(i, "kind")
			if counts[k] == 0 {
				kinds = append(kinds, k)
			}
			counts[k]++
		}
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s × %d", k, counts[k]))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		out += "\nAgent events over the run: " + strings.Join(parts, ", ") + " (times in " + EventsFile + ").\n"
	}
	out += "\nShares are of successful requests; workers have different CPU limits (names say which), so a share " +
		"proportional to capacity is the goal, not an equal one. Seed 004 reports no throughput or latency figures to compare with.\n"
	return out, nil
}

// throttledReport compares the pickers while the first worker is
// throttled mid-cell: tail latency and errors per picker and load, and the
// goal that the latency-aware pickers' p99 stays at or below weighted
// random's in the same run.
func throttledReport(stats []cellStats) string {
	var rows [][]string
	wr := map[int]cellStats{}
	var verdicts []string
	for _, c := range stats {
		if c.workload != WorkloadThrottled {
			continue
		}
		rows = append(rows, []string{c.target, strconv.Itoa(c.clients), strconv.Itoa(c.n), strconv.Itoa(c.n - c.ok),
			experiments.Num(c.rps, 0), experiments.Num(c.lat.P50, 2), experiments.Num(c.lat.P99, 2), experiments.Num(c.lat.P999, 2)})
		if c.target == pick.WeightedRandom {
			wr[c.clients] = c
		}
	}
	if len(rows) == 0 {
		return ""
	}
	for _, c := range stats {
		base, ok := wr[c.clients]
		if c.workload != WorkloadThrottled || !ok || !slices.Contains(pick.LatencyAware, c.target) {
			continue
		}
		mark := "≤"
		if c.lat.P99 > base.lat.P99 {
			mark = "**>**"
		}
		verdicts = append(verdicts, fmt.Sprintf("%s, %d clients: p99 %s ms %s weighted random's %s ms", c.target, c.clients,
			experiments.Num(c.lat.P99, 1), mark, experiments.Num(base.lat.P99, 1)))
	}
	out := "\n**One worker throttled mid-cell** (cpu-throttled: the first worker drops to --throttle CPUs halfway through each cell, " +
		"docker update --cpus on Docker, a CPU quota per 100-ms period enforced by stop/continue on processes, the Pod resized in place on Kubernetes):\n\n"
	out += experiments.MarkdownTable([]string{"target", "clients", "requests", "failed", "req/s", "p50 ms", "p99 ms", "p99.9 ms"}, rows)
	if len(verdicts) > 0 {
		out += "\nGoal — latency-aware pickers' p99 ≤ weighted random's, same run:\n\n- " + strings.Join(verdicts, "\n- ") + "\n"
		out += "\nwrr-reports weighs by the workers' own load reports (gRPC A58: QPS over the last complete second / utilisation, " +
			"a new weight each --weight-period after a --blackout): it sees a throttle about two seconds late, so cells of a few " +
			"seconds show its lag more than its steady state (--duration 10s for the latter).\n"
	}
	return out
}
