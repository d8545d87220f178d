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
# slows the hops (rounds more than twice as long at n = 16 here), and a
# longer round holds more serving-lease frames: count with it, time without.
set -euo pipefail
out=${1:?usage: tools/hop-syscalls.sh OUT [ring-failover flags]}
shift
. "$(dirname "$0")/perf-failover.sh"
perf_failover hop-syscalls "$out" -g -e raw_syscalls:sys_enter -- "$@"

"$out/schedwindows" --offset "$offset" --csv "$out/ring-failover.csv" --windows >"$out/windows.txt"
hops=$(awk '{ h += $2 } END { print h }' "$out/windows.txt")
# The traced rounds' median length: lease frames a hop grow with it.
median_ms=$(awk '{ split($1, t, ","); print (t[2] - t[1]) * 1e3 }' "$out/windows.txt" | sort -n |
	awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
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
		# Kernel frames, the plumbing of a system call in the runtime and libraries,
		# and in ring/transport and ring/wire: the caller is who sent or read.
		if (sym !~ /[.\/]/ || sym ~ /^(internal\/runtime\/syscall|syscall\.|internal\/poll\.|net\.\(\*(netFD|conn)\)|runtime\.(futex|usleep|notewakeup|notesleep|notetsleep_internal|semawakeup|semasleep|systemstack|write1|read|lock2|unlock2|lockWithRank|unlockWithRank|lock|unlock|reentersyscall|entersyscall|netpoll)(\.abi0)?$|bufio\.|io\.|golang\.org\/x\/net\/netutil|github\.com\/ringside\/ringside\/ring\/(transport|wire)\.)/) next
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
	echo "ELECTED rounds traced: $(wc -l <"$out/windows.txt"), median ${median_ms} ms"
	echo
	perf script -i "$out/perf.data" --comm tokenring -F comm,tid,trace,ip,sym 2>/dev/null | summarize tokenring "$relay_hops"
} | tee "$out/syscalls.txt"
