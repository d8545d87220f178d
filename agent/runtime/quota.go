package runtime

import "time"

// quotaPeriod is CFS's default period, the one docker update --cpus sets.
const quotaPeriod = 100 * time.Millisecond

// cpuQuota is the CFS bandwidth rule: a worker may use quota of CPU time
// in each period, at any moment of it. A rule of "run the same share of
// every few milliseconds" instead starves a limited worker on a busy
// machine: a window the scheduler does not give it in time is lost, and
// with two cores taken a worker at a fifth of a CPU got a twentieth.
type cpuQuota struct {
	quota, period time.Duration
	threads       int // CPUs the worker can use at once (its GOMAXPROCS)
}

// next says, from the CPU time the worker used so far in this period and
// the time left in it, whether to stop it now (until the period ends) and
// how long to wait before looking again: no longer than the rest of its
// quota would last at full speed on all its threads.
func (q cpuQuota) next(used, left time.Duration) (halt bool, wait time.Duration) {
	rest := q.quota - used
	if rest <= 0 {
		return true, left
	}
	return false, min(left, max(rest/time.Duration(q.threads), time.Millisecond))
}
