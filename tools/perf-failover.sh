# Sourced by tools/sched-profile.sh and tools/hop-syscalls.sh.
#
# perf_failover NAME OUT PERF_RECORD_ARGS... -- RING_FAILOVER_FLAGS...
# checks for perf, builds tools/schedwindows into OUT, sets offset
# (CLOCK_REALTIME − CLOCK_MONOTONIC, schedwindows offset) and runs
# ring-failover under a system-wide perf record on the monotonic clock,
# into OUT/perf.data, with ringside from RINGSIDE_BINARIES (default bin/).
perf_failover() {
	local name=$1 out=$2 rec=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		rec+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	command -v perf >/dev/null || { echo "$name: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
	mkdir -p "$out"
	go build -o "$out/schedwindows" ./tools/schedwindows
	offset=$("$out/schedwindows" offset)
	local bin=${RINGSIDE_BINARIES:-$PWD/bin}
	RINGSIDE_BINARIES=$bin perf record -q -k CLOCK_MONOTONIC -a "${rec[@]}" -o "$out/perf.data" -- \
		"$bin/ringside" run ring-failover --out "$out" "$@"
}
