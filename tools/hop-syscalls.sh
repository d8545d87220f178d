#!/bin/bash
# The system calls behind one ELECTED hop: runs ring-failover under perf's
# raw_syscalls tracepoint with call chains (system-wide, as root) and counts,
# per hop, the calls ringnode processes made inside the ELECTED rounds (the
# CSV's elected_at_unix_ns and elected_round_ms), by call and by the first
# caller above the runtime's system-call plumbing; then the same for the bare
# relays (cmd/tokenring) over their whole run, per hop of the trips in
# ring-failover-bare.csv (their start-up's calls included: mmap, sigaction
# and the like, a few hundred a process).
#
#   tools/hop-syscalls.sh OUT [ring-failover flags, e.g. --n 16 --reps 16]
#
# OUT keeps the run's results, perf.data and the summary, syscalls.txt.
# Needs perf (Debian: linux-perf) and bin/ from `make build`. The tracepoint
# slows the hops (about a fifth at n = 16 here): count with it, time without.
set -euo pipefail
out=${1:?usage: tools/hop-syscalls.sh OUT [ring-failover flags]}
shift
command -v perf >/dev/null || { echo "hop-syscalls: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$out"
go build -o "$out/schedwindows" ./tools/schedwindows
offset=$("$out/schedwindows" offset)
bin=${RINGSIDE_BINARIES:-$PWD/bin}
RINGSIDE_BINARIES=$bin perf record -q -g -k CLOCK_MONOTONIC -a -e raw_syscalls:sys_enter -o "$out/perf.data" -- \
	"$bin/ringside" run ring-failover --out "$out" "$@"

# Each measured round as "from,to hops" in perf's seconds.
awk -F, -v off="$offset" '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{ at = $col["elected_at_unix_ns"]; ms = $col["elected_round_ms"]; n = $col["n"] }
	at > 0 && ms > 0 && n >= 3 { s = (at - off) / 1e9; printf "%.6f,%.6f %d\n", s, s + ms / 1e3, n - 1 }
' "$out/ring-failover.csv" >"$out/windows.txt"
[ -s "$out/windows.txt" ] || { echo "hop-syscalls: no measured ELECTED round in $out/ring-failover.csv" >&2; exit 1; }
hops=$(awk '{ h += $2 } END { print h }' "$out/windows.txt")
relay_hops=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next } { h += $col["n"] } END { print h + 0 }' "$out/ring-failover-bare.csv")

# summarize COMM HOPS: perf script's call chains on stdin, counts per hop.
summarize() {
	awk -v comm="$1" -v hops="$2" '
	BEGIN {
		split("0 read 1 write 7 poll 35 nanosleep 202 futex 232 epoll_wait 281 epoll_pwait 275 splice 24 sched_yield 44 sendto 45 recvfrom 228 clock_gettime 39 getpid 234 tgkill 14 rt_sigprocmask 13 rt_sigaction 9 mmap 11 munmap 28 madvise", a, " ")
		for (i = 1; i < length(a); i += 2) name[a[i]] = a[i + 1]
	}
	function flush() { if (call != "") { calls[call]++; sites[call " ← " (site == "" ? "?" : site)]++ } }
	$1 == comm {
		flush(); match($0, /NR [0-9]+/); nr = substr($0, RSTART + 3, RLENGTH - 3)
		call = (nr in name) ? name[nr] : "NR " nr; site = ""; next
	}
	/^[ \t]+[0-9a-f]+ / {
		if (site != "" || call == "") next
		sym = $2
		# Kernel frames, the runtime and library plumbing of a system call.
		if (sym !~ /[.\/]/ || sym ~ /^(internal\/runtime\/syscall|syscall\.|internal\/poll\.|net\.\(\*(netFD|conn)\)|runtime\.(futex|usleep|notewakeup|notesleep|notetsleep_internal|semawakeup|semasleep|systemstack|write1|read|lock2|unlock2|lockWithRank|unlockWithRank|lock|unlock|reentersyscall|entersyscall|netpoll)(\.abi0)?$|bufio\.|io\.|golang\.org\/x\/net\/netutil)/) next
		site = sym; next
	}
	/^[^ \t]/ { flush(); call = "" }
	END {
		flush()
		printf "%s, %d hops: system calls per hop (at least 0.05)\n", comm, hops
		for (c in calls) { t += calls[c]; if (calls[c] / hops >= 0.05) printf "  %7.2f  %s\n", calls[c] / hops, c | "sort -rn" }
		close("sort -rn")
		printf "  %7.2f  all (those under 0.05 per hop too)\n", t / hops
		print "  by caller (at least 0.05 per hop):"
		for (s in sites) if (sites[s] / hops >= 0.05) printf "  %7.2f  %s\n", sites[s] / hops, s | "sort -rn"
		close("sort -rn")
	}'
}

{
	while read -r w _; do
		perf script -i "$out/perf.data" --time "$w" --comm ringnode -F comm,tid,trace,ip,sym 2>/dev/null
	done <"$out/windows.txt" | summarize ringnode "$hops"
	echo
	perf script -i "$out/perf.data" --comm tokenring -F comm,tid,trace,ip,sym 2>/dev/null | summarize tokenring "$relay_hops"
} | tee "$out/syscalls.txt"
