#!/usr/bin/env bash
# Transparent huge pages for every process, not only those that ask
# (madvise), where the kernel lets root choose: CI on a fresh machine.
# This machine is a VM in which a page fault is dear, and a Go compile
# faults in its whole heap a 4-KiB page at a time. `go build` of
# k8s.io/api/core/v1 on an empty build cache, four runs alternating
# (2026-11-27, beside a CI build): madvise 1.97 M minor faults and
# 81 + 26 s, 88 + 28 s of user + system CPU; always 0.29 M faults and
# 64 + 15 s, 59 + 14 s — 27–37 % less CPU for a compile, and the
# tools phase of a fresh machine is compiles.
# A speed-up only: where the setting is not writable it stays as it is.
set -euo pipefail
f=/sys/kernel/mm/transparent_hugepage/enabled
[ -r "$f" ] || exit 0
cur=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$f")
[ "$cur" = always ] && exit 0
if [ -w "$f" ] && echo always >"$f" 2>/dev/null; then
  echo "hugepages: transparent huge pages now always (was $cur)"
else
  echo "hugepages: transparent huge pages stay $cur ($f is not writable)"
fi
