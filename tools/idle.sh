#!/usr/bin/env bash
# idle.sh COMMAND...: runs COMMAND where it takes only CPU that nothing else
# wants — a cpu cgroup marked idle (cgroup v1 or v2, cpu.idle = 1: the
# scheduler treats the group's tasks as SCHED_IDLE, and any other runnable
# task preempts them), falling back to the lowest CPU weight, then to
# nice 19 where no cgroup is writable. .ci/run uses it to fill the tools
# phase's idle CPU (image builds waiting on the network and the disk) with
# the tests' race compiles.
#
# Nice alone is not enough here: with the kernel's autogroups and Docker's
# cgroups, nice orders a process only against its own session, and the
# image builds run in the engine's cgroups beside it at full weight.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: idle.sh COMMAND..." >&2; exit 2; }

name=ringside-idle
join() {
  local dir=$1
  {
    mkdir -p "$dir" &&
      { echo 1 >"$dir/cpu.idle" || echo 2 >"$dir/cpu.shares" || echo 1 >"$dir/cpu.weight"; } &&
      echo $$ >"$dir/cgroup.procs"
  } 2>/dev/null
}

if [ -d /sys/fs/cgroup/cpu ] && join "/sys/fs/cgroup/cpu/$name"; then
  echo "idle: in cgroup v1 cpu:/$name" >&2
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null &&
  join "/sys/fs/cgroup/$name"; then
  echo "idle: in cgroup v2 /$name" >&2
else
  echo "idle: no writable cpu cgroup; nice 19 only" >&2
fi
exec nice -n 19 "$@"
