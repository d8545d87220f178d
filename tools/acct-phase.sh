#!/usr/bin/env bash
# CPU seconds by command name of the processes that ended in a window, from
# a process accounting file (Debian's acct: `accton FILE` before a run,
# `accton off` after): how docs/timings.md splits a fresh .ci/run's phases
# (each exited process counted in the phase it ended in).
#
#   tools/acct-phase.sh FILE FROM TO [TOP]
#
# FROM and TO are Unix seconds (a run's start from `date +%s`, plus the
# phase ends .ci/run prints). The first line is the window's total, then
# its TOP commands (default 40), largest first. A process is in FILE only
# once it has ended: the engine and the host's containerd, still running,
# are not.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 FILE FROM TO [TOP]" >&2; exit 2; }
file=$1 from=$2 to=$3 top=${4:-40}
for v in "$from" "$to" "$top"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "acct-phase: \"$v\" is not a whole number" >&2; exit 2; }
done
[ -f "$file" ] && [ -r "$file" ] || { echo "acct-phase: no readable accounting file $file" >&2; exit 2; }
command -v dump-acct >/dev/null || { echo "acct-phase: dump-acct is not installed (Debian's acct)" >&2; exit 1; }
# dump-acct: command|version|user|system|elapsed|…|start ("Sun Dec  6
# 16:01:31 2026", local time); user, system and elapsed in 1/100 s.
dump-acct "$file" | awk -F'|' -v from="$from" -v to="$to" '
  BEGIN { split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", m, " "); for (i in m) mon[m[i]] = i }
  NF >= 15 {
    split($15, d, " "); split(d[4], hms, ":")
    end = mktime(d[5] " " mon[d[2]] " " d[3] " " hms[1] " " hms[2] " " hms[3]) + $5 / 100
    if (end < from || end >= to) next
    c = $1; sub(/ +$/, "", c)
    cpu[c] += ($3 + $4) / 100; n[c]++; total += ($3 + $4) / 100
  }
  END { for (c in cpu) printf "%8.1f %5d %s\n", cpu[c], n[c], c; printf "%8.1f %5s (total)\n", total, "" }' |
  sort -rn | head -n "$((top + 1))"
