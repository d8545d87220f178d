package timerslack

import (
	"strings"
)

// The Go runtime's monitor (sysmon) goes into a deep sleep once every
// processor of the process is idle, and the first system call after that
// wakes it (entersyscall → a futex wake-up) — in a ring server, on every
// hop: the frame's read is that call. The woken monitor then polls every
// 20 µs (plus the slack) until it has found nothing to do fifty times,
// on the cores the hop's next server needs. GODEBUG's schedtrace, when
// positive, keeps the monitor out of the deep sleep: it then sleeps up
// to 10 ms between rounds while the process idles, costs no wake-up on
// a system call, and prints a scheduler trace only every schedtrace
// milliseconds — at the largest value, every 24.8 days. The runtime
// reads GODEBUG when it starts, so Apply executes the program again for
// it, as for the slack.
const monitorAwake = "schedtrace=2147483647"

// WithMonitorAwake returns environ with the monitor kept awake: its
// GODEBUG extended by schedtrace, unless it already sets schedtrace
// (someone's own choice, left alone).
func WithMonitorAwake(environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	found := false
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok || found {
			out = append(out, kv)
			continue
		}
		found = true // the first GODEBUG is the one the runtime reads
		if !hasSchedtrace(v) {
			v = strings.TrimSuffix(v, ",")
			if v != "" {
				v += ","
			}
			v += monitorAwake
		}
		out = append(out, "GODEBUG="+v)
	}
	if !found {
		out = append(out, "GODEBUG="+monitorAwake)
	}
	return out
}

// hasSchedtrace reports whether a GODEBUG value sets schedtrace.
func hasSchedtrace(godebug string) bool {
	return strings.HasPrefix(godebug, "schedtrace=") || strings.Contains(godebug, ",schedtrace=")
}

// godebug is environ's GODEBUG, the first, as the runtime reads it.
func godebug(environ []string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v
		}
	}
	return ""
}
