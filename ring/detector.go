package ring

import (
	"math/rand/v2"
	"time"
)

// DefaultSuspectTimeout is seed 002's failure-detection timeout: a server
// that hears nothing from the coordinator for this long starts an election.
const DefaultSuspectTimeout = 700 * time.Millisecond

// Detector is a heartbeat failure detector: it suspects its peer once no
// heartbeat has been heard for Timeout plus a random jitter in [0, Jitter).
// The jitter is drawn anew at every heartbeat, so that servers that heard the
// same last heartbeat do not all suspect at the same instant — fewer
// concurrent initiators, fewer election messages. Time is whatever clock the
// caller passes in (virtual in the simulator, monotonic on the network).
type Detector struct {
	timeout, jitter time.Duration
	rng             *rand.Rand
	heard, deadline time.Duration
}

// NewDetector returns a detector whose first deadline is now+timeout(+jitter).
// rng may be nil when jitter is zero.
func NewDetector(now, timeout, jitter time.Duration, rng *rand.Rand) *Detector {
	d := &Detector{timeout: timeout, jitter: jitter, rng: rng}
	d.Heard(now)
	return d
}

// Heard records a heartbeat at now.
func (d *Detector) Heard(now time.Duration) {
	d.heard = now
	d.deadline = now + d.timeout
	if d.jitter > 0 && d.rng != nil {
		d.deadline += time.Duration(d.rng.Int64N(int64(d.jitter)))
	}
}

// Suspect reports whether the peer is suspected at now.
func (d *Detector) Suspect(now time.Duration) bool { return now >= d.deadline }

// Deadline is the instant at which the peer becomes suspected.
func (d *Detector) Deadline() time.Duration { return d.deadline }

// Silence is how long nothing has been heard from the peer.
func (d *Detector) Silence(now time.Duration) time.Duration { return now - d.heard }
