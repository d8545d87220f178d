#!/usr/bin/env bash
# The machine's CPU seconds and the wall seconds a command took, for work
# that runs in processes the command does not wait on itself (a build in
# the engine's BuildKit, a server it starts), which time(1) does not see:
# every CPU's time but idle and iowait from /proc/stat, before and after.
# Anything else running counts too: measure on an idle machine.
#
#   tools/cpu-of.sh COMMAND [ARG...]
#
# Prints "cpu-of: X CPU-s, Y s" on standard error; exits as COMMAND did.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal,
# in clock ticks.
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
hz=$(getconf CLK_TCK)
b0=$(busy) t0=$(date +%s%N)
"$@"
rc=$?
b1=$(busy) t1=$(date +%s%N)
awk -v b="$((b1 - b0))" -v hz="$hz" -v ns="$((t1 - t0))" \
  'BEGIN { printf "cpu-of: %.1f CPU-s, %.1f s\n", b / hz, ns / 1e9 }' >&2
exit $rc
