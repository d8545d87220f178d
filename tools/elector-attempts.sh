#!/usr/bin/env bash
# tools/elector-attempts.sh DIR — where the leaders' elections went, from
# the elector logs that `ringside run kube-election-latency --elector-logs
# DIR` kept: per algorithm, the mean of each leader's first winning
# acquisition attempt's read, gate and write (ringside's elector: the BLD
# family, ranked), and of its first lock Get and Create (the default's,
# client-go's elector, timed by the lock). A leader's log is one with an
# event=started line. Then, for ringside's elector, validation's wait
# (below) per algorithm and application count.
set -euo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: $0 DIR (an --elector-logs folder)" >&2; exit 2; }
cd "$1"
shopt -s nullglob
logs=(*.log)
[ ${#logs[@]} -gt 0 ] || { echo "$0: no *.log in $1" >&2; exit 1; }
leaders=$(grep -l 'event=started' "${logs[@]}" || true)
[ -n "$leaders" ] || { echo "$0: no leader's log in $1" >&2; exit 1; }
# mean FIELD... : the mean, in ms, of each key=duration field of the lines
# on stdin (Go's durations: ns, µs, ms or s).
mean() {
  awk -v keys="$*" '
    function ms(v) {
      if (v ~ /µs$/) { sub(/µs$/, "", v); return v / 1000 }
      if (v ~ /ns$/) { sub(/ns$/, "", v); return v / 1e6 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /s$/)  { sub(/s$/, "", v);  return v * 1000 }
      return "x"
    }
    BEGIN { n = split(keys, k, " ") }
    { for (i = 1; i <= NF; i++) { eq = index($i, "="); if (!eq) continue
        key = substr($i, 1, eq - 1); v = ms(substr($i, eq + 1))
        for (j = 1; j <= n; j++) if (key == k[j] && v != "x") { sum[key] += v; cnt[key]++ } } }
    END { for (j = 1; j <= n; j++) printf "%s%s %.1f ms (%d)", (j > 1 ? ", " : ""), k[j], (cnt[k[j]] ? sum[k[j]] / cnt[k[j]] : 0), cnt[k[j]]; print "" }'
}
# Per algorithm, as each elector's first line names it (msg=campaigning
# ... algorithm=NAME): client-go's elector (the default) logs its lock's
# Get and Create, ringside's the read, gate and write of each attempt.
declare -A alg_of
for f in "${logs[@]}"; do
  alg=$(grep -m1 -o 'algorithm=[^ ]*' "$f" | cut -d= -f2)
  alg_of[$f]=${alg:-unknown}
done
declare -A by
for f in $leaders; do by[${alg_of[$f]}]+="$f "; done
for alg in $(printf '%s\n' "${!by[@]}" | sort); do
  set -- ${by[$alg]}
  printf '%s, %d leaders: ' "$alg" $#
  if [ "$alg" = default ]; then
    for f; do grep -m1 'op=get' "$f" | sed 's/took=/get=/'; grep -m1 'op=create' "$f" | sed 's/took=/create=/'; done | mean get create
  else
    for f; do grep -m1 'won=true' "$f"; done | mean read gate write
  fi
done
# Validation (bld-optimistic): from each acquisition that won its write to
# the holder's start (its own write came back on the watch and it
# qualified) or to its freeing (it did not), per algorithm and
# application count (the election sets' folder prefix, NS_app-K-…), in
# every log, leaders' or not: a freed holder need not lead later.
declare -A apps_of # election set → its application count
for f in "${logs[@]}"; do
  alg=${alg_of[$f]}
  case $alg in default | unknown) continue ;; esac
  ns=${f%%_*}
  [ -n "${apps_of[$ns]:-}" ] ||
    apps_of[$ns]=$(printf '%s\n' "${ns}"_app-* | sed 's/.*_app-\([0-9]*\)-.*/\1/' | sort -u | wc -l)
  # time=YYYY-MM-DDTHH:MM:SS.mmmZ, as ms of the day (a day's turn adds one).
  awk -v key="$alg ${apps_of[$ns]}" '
    /^time=/ { split(substr($1, 17, 12), h, ":"); t = (h[1] * 3600 + h[2] * 60 + h[3]) * 1000
      if (t < last) t += 86400000; last = t }
    /won=true/ { won = t; next }
    won != "" && /event=started/ { print key, "started", t - won; won = "" }
    won != "" && /refused by validation/ { print key, "freed", t - won; won = "" }' "$f"
done | sort -k1,1 -k2,2n -k3,3 -k4,4n | awk '
  function flush() { if (n) printf "%s, %d applications: %d %s after a mean %.0f ms (p90 %.0f, max %.0f)\n", a, p, n, k, s / n, v[int((9 * n + 9) / 10)], v[n] }
  { if ($1 != a || $2 != p || $3 != k) { flush(); a = $1; p = $2; k = $3; n = 0; s = 0 } v[++n] = $4; s += $4 }
  END { flush() }'
