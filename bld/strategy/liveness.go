package strategy

import "time"

// A LeaseCandidate says it is alive only when asked: client-go's
// candidate renews its object every five minutes, and at once when the
// object's pingTime passes its renewTime. So the controller asks (pings)
// the candidates of a Lease that has gone free, and names a holder only
// among those that answered since — a candidate killed with its Pod
// leaves its object behind, and naming it would cost a whole lease.

// Status is what the controller knows of a candidate.
type Status int

const (
	// Live: it answered since the Lease went free (or, for a Lease still
	// held, has not failed to answer a ping).
	Live Status = iota
	// Unasked: it may be gone; ping it.
	Unasked
	// Pending: pinged, its answer awaited.
	Pending
	// Dead: it did not answer a ping within the wait.
	Dead
)

// Liveness classifies a candidate that renewed at renew and was last
// pinged at ping (zero: never), for a Lease free since since (zero for a
// Lease still held: there the controller does not ask). A candidate
// that answered its last ping is alive as of its answer. A renewal up to
// wait before the Lease went free counts as an answer too: a new
// election's candidates register side by side with the Lease's creation,
// some of them a moment before it (and by clocks of their own), and
// pinging them would cost the election a round trip through every one;
// a candidate that dies that close to its Lease going free is the rare
// case the ping is not worth.
func Liveness(now, since, renew, ping time.Time, wait time.Duration) Status {
	if ping.After(renew) {
		if now.Sub(ping) < wait {
			return Pending
		}
		return Dead
	}
	if !renew.Before(since.Add(-wait)) {
		return Live
	}
	return Unasked
}

// FreeSince is when e's Lease went free: its renewal for a Lease with no
// holder (created free, or given up), else the end of its holder's term.
// Meaningful only for a free Lease.
func (e Election) FreeSince() time.Time {
	if e.Holder == "" {
		return e.RenewTime
	}
	return e.RenewTime.Add(e.LeaseDuration)
}
