#!/bin/bash
# Where the CPUs' time goes inside ringnode's ELECTED rounds: runs
# ring-failover under perf's system-wide CPU sampling with call chains (as
# root) and reports only the samples that fall inside a round — by command,
# then ringnode's functions with the time spent under them (a sample counts
# once for every function on its stack).
#
#   tools/cpu-profile.sh OUT [ring-failover flags, e.g. --n 16 --reps 16]
#
# OUT keeps the run's results, perf.data and the report, cpu.txt; the rounds
# are the CSV's (elected_at_unix_ns, elected_round_ms). Needs perf (Debian:
# linux-perf) and bin/ from `make build`. Sampling at CPU_PROFILE_HZ (10000
# by default) slows the hops too: compare runs sampled alike.
set -euo pipefail
out=${1:?usage: tools/cpu-profile.sh OUT [ring-failover flags]}
shift
. "$(dirname "$0")/perf-failover.sh"
perf_failover cpu-profile "$out" -g -F "${CPU_PROFILE_HZ:-10000}" -- "$@"
"$out/schedwindows" --offset "$offset" --csv "$out/ring-failover.csv" --windows >"$out/windows.txt"
# perf takes several time ranges, space-separated, in one --time.
rounds=$(awk '{ print $1 }' "$out/windows.txt" | paste -sd ' ')
{
	awk '{ split($1, t, ","); s += t[2] - t[1]; h += $2 } END { printf "== %d ELECTED rounds, %.1f µs a hop while sampled\n", NR, s * 1e6 / h }' "$out/windows.txt"
	echo "== share of the samples inside the rounds, by command"
	perf report -i "$out/perf.data" --time "$rounds" --no-children --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep .
	echo "== ringnode's functions with what they called, 0.5 % of all samples inside the rounds or more"
	perf report -i "$out/perf.data" --time "$rounds" --comms ringnode --children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null |
		grep -v '^#' | grep .
	echo "== ringnode's functions by themselves, 0.5 % or more"
	perf report -i "$out/perf.data" --time "$rounds" --comms ringnode --no-children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null |
		grep -v '^#' | grep .
} | tee "$out/cpu.txt"
