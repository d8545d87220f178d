#!/usr/bin/env bash
# tools/hop-trace.sh N OUT [RINGNODE FLAGS...] — where an election hop's
# time goes, from the servers' own execution traces: a ring of N ringnode
# processes on loopback (GOMAXPROCS=1 each, as ring-failover runs more
# servers than cores), every server but the coordinator traced for 3 s
# (GET /internal/profile/trace), the coordinator killed 1 s in, and
# tools/hoptrace splitting each hop of the ELECTION and the ELECTED rounds
# into the sender's write returning → the receiver woken by the network
# → running → its forward written. Nothing else should run beside it.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N OUT [RINGNODE FLAGS...]" >&2; exit 2; }
n=$1 out=$2; shift 2
base=${HOP_TRACE_PORT:-17100}
cd "$(dirname "$0")/.."
rm -rf "$out" && mkdir -p "$out/bin"
go build -o "$out/bin/" ./cmd/ringnode ./tools/hoptrace
RINGNODE_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export RINGNODE_SECRET GOMAXPROCS=1
# The profile's secret goes to curl in a file of its own, not on a
# command line that ps shows.
(umask 077 && printf 'X-Ringside-Secret: %s\n' "$RINGNODE_SECRET" >"$out/secret.header")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
status() { curl -sf "127.0.0.1:$1/internal/status"; }
field() { sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",]*\\).*/\\1/p"; }
for i in $(seq 0 $((n - 1))); do
  port=$((base + i)) join=()
  [ "$i" -gt 0 ] && join=(--join "127.0.0.1:$base")
  "$out/bin/ringnode" --addr "127.0.0.1:$port" --data "$out/data$i" "${join[@]}" "$@" >"$out/ringnode$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do status "$port" >/dev/null && break; sleep 0.1; done
done
for _ in $(seq 100); do
  [ "$(status "$base" | grep -o '"servers":\[[^]]*\]' | tr ',' '\n' | grep -c 127.0.0.1)" = "$n" ] && break
  sleep 0.2
done
sleep 2 # the ring settles: joins rebalanced, leases confirmed
coord=$(status "$base" | field leader)
victim=
for i in $(seq 0 $((n - 1))); do
  port=$((base + i))
  if [ "127.0.0.1:$port" = "$coord" ]; then victim=${pids[$i]} last=$(( (i + n - 1) % n )); continue; fi
  curl -sf -H @"$out/secret.header" -o "$out/$port.trace" "127.0.0.1:$port/internal/profile/trace?seconds=3" &
done
[ -n "$victim" ] || { echo "hop-trace: no coordinator among the servers ($coord)" >&2; exit 1; }
sleep 1
kill -9 "$victim"
wait $(jobs -p | grep -vxF "$(printf '%s\n' "${pids[@]}")") 2>/dev/null || true
st=$(status $((base + last)))
leader=$(echo "$st" | field leader)
st=$(status "${leader#*:}")
sent=$(echo "$st" | grep -o '"election_sent_ns":[0-9]*' | cut -d: -f2)
announced=$(echo "$st" | grep -o '"announced_ns":[0-9]*' | cut -d: -f2)
won=$(echo "$st" | grep -o '"won_ns":[0-9]*' | cut -d: -f2)
echo "killed $coord; $leader won"
echo "== ELECTION round (the new leader's own ELECTION sent → its ELECTED announced)"
"$out/bin/hoptrace" --from "$sent" --to "$announced" "$out"/*.trace | tail -1
echo "== ELECTED round"
"$out/bin/hoptrace" --from "$announced" --to "$won" "$out"/*.trace | tee "$out/elected.txt" | tail -1
