#!/bin/bash
# What the CPUs did while ringnode's ELECTED rounds went around: runs
# ring-failover under a system-wide trace of the scheduler (perf, as root)
# and sums the trace inside each round (tools/schedwindows).
#
#   tools/sched-profile.sh OUT [ring-failover flags, e.g. --n 16 --reps 8]
#
# OUT keeps the run's results, perf.data and the summary, sched.txt.
# Needs perf (Debian: linux-perf) and bin/ from `make build`.
set -euo pipefail
out=${1:?usage: tools/sched-profile.sh OUT [ring-failover flags]}
shift
. "$(dirname "$0")/perf-failover.sh"
perf_failover sched-profile "$out" -e sched:sched_switch -e sched:sched_waking -e sched:sched_process_exec -- "$@"
perf script -i "$out/perf.data" -F comm,pid,tid,cpu,time,event,trace 2>/dev/null |
	"$out/schedwindows" --offset "$offset" --csv "$out/ring-failover.csv" | tee "$out/sched.txt"
