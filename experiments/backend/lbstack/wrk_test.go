package lbstack

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const wrkSample = `Running 3s test @ http://127.0.0.1:40001/work?cost=0
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   512.33us  301.20us   9.87ms   91.02%
    Req/Sec    15.80k     1.20k   18.01k    70.00%
  Latency Distribution
     50%  450.00us
     75%  600.12us
     90%  790.00us
     99%    1.52ms
  94512 requests in 3.00s, 12.98MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  31504.12
Transfer/sec:      4.33MB
`

func TestParseWrk(t *testing.T) {
	r, err := ParseWrk(wrkSample)
	require.NoError(t, err)
	assert.Equal(t, WrkResult{Requests: 94512, Errors: 7, RPS: 31504.12, P50: 450 * time.Microsecond, P99: 1520 * time.Microsecond}, r)
	for _, drop := range []string{"requests in", "Requests/sec", "50%", "99%"} {
		var kept []string
		for _, l := range strings.Split(wrkSample, "\n") {
			if !strings.Contains(l, drop) {
				kept = append(kept, l)
			}
		}
		_, err := ParseWrk(strings.Join(kept, "\n"))
		assert.ErrorContains(t, err, "wrk output", drop)
	}
}

// Whatever wrk prints, a parse that succeeds has both quantiles and
// non-negative counts.
func FuzzParseWrk(f *testing.F) {
	f.Add(wrkSample)
	f.Add("1 requests in\nRequests/sec: 1\n 50% 1us\n 99% 1m\n")
	f.Fuzz(func(t *testing.T, out string) {
		r, err := ParseWrk(out)
		if err != nil {
			return
		}
		if r.P50 <= 0 || r.P99 <= 0 || r.Requests < 0 || r.Errors < 0 || r.RPS < 0 {
			t.Fatalf("accepted %q as %+v", out, r)
		}
	})
}
