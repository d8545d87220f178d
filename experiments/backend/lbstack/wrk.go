package lbstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Wrk runs wrk (bin) with args and returns what it printed; an error
// carries its stderr.
func Wrk(ctx context.Context, bin string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// WrkResult is what one wrk run reports.
type WrkResult struct {
	Requests, Errors int
	RPS              float64
	P50, P99         time.Duration
}

var (
	wrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)\s*$`)
	wrkLatency  = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s|m)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s+(\d+)\s*$`)
	wrkSocket   = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)\s*$`)
)

// ParseWrk reads wrk --latency output; missing totals or quantiles are an
// error naming what is missing.
func ParseWrk(out string) (WrkResult, error) {
	var r WrkResult
	m := wrkRequests.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New("wrk output: no \"N requests in\" line")
	}
	r.Requests, _ = strconv.Atoi(m[1])
	if m = wrkRPS.FindStringSubmatch(out); m == nil {
		return r, errors.New("wrk output: no Requests/sec line")
	}
	r.RPS, _ = strconv.ParseFloat(m[1], 64)
	for _, l := range wrkLatency.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(l[2], 64)
		if err != nil {
			return r, fmt.Errorf("wrk output: latency %q", l[2])
		}
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}[l[3]]
		d := time.Duration(v * float64(unit))
		if l[1] == "50" {
			r.P50 = d
		} else {
			r.P99 = d
		}
	}
	if r.P50 == 0 || r.P99 == 0 {
		return r, errors.New("wrk output: no 50% and 99% latency (run with --latency)")
	}
	if m = wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.Atoi(m[1])
		r.Errors += n
	}
	if m = wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			r.Errors += n
		}
	}
	return r, nil
}
