package ring

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Config configures a Node. Only Self and Ring are required.
type Config struct {
	Self UID
	// Ring is the membership in message order.
	Ring *Ring
	// Round and Leader resume persisted state after a restart.
	Round  uint64
	Leader UID
	// HopBound is an upper bound on one hop's delivery time. A participant
	// that has not seen the election end within 2·(live members)·HopBound
	// restarts it in a new round. Zero disables restarts.
	HopBound time.Duration
	// SuspectTimeout enables the coordinator failure detector: a server
	// that hears no heartbeat for this long (plus up to SuspectJitter)
	// starts an election. Zero disables it.
	SuspectTimeout, SuspectJitter time.Duration
	// HeartbeatInterval is how often the leader sends heartbeats. Zero
	// disables them.
	HeartbeatInterval time.Duration
	// AckTimeout enables per-hop acknowledgement: every ELECTION and
	// ELECTED is acknowledged by the server that received it, and one not
	// acknowledged within AckTimeout is sent again, up to Retries times;
	// then its target is treated as unreachable (marked down, the message
	// goes on to the next successor). Chang–Roberts assumes reliable
	// links; this makes one lost message cost a retransmission instead
	// of an election restart. Zero disables it: the algorithm as
	// published, whose message counts the closed forms give.
	AckTimeout time.Duration
	// Retries bounds the retransmissions of one message (default 3).
	Retries int
	// Rand draws the detector's jitter; required only with SuspectJitter.
	Rand *rand.Rand
	// Now is the time the node starts at, for the detector's first deadline.
	Now time.Duration
}

// Status is a node's externally visible election state.
type Status struct {
	Leader      UID // zero while unknown
	Round       uint64
	Participant bool
	Blocked     bool // ELECTED seen, END not yet
	Announcing  bool // this node won and its ELECTED is still travelling
}

// Stats counts a node's own actions.
type Stats struct {
	Initiated int // elections this node started, restarts included
	Restarts  int // of which restarts after the election timeout
	// Retransmissions counts messages sent again for want of an
	// acknowledgement (Config.AckTimeout).
	Retransmissions int
	// Challenges counts elections started against a smaller leader that
	// an election passed this node by (see challenge): the price of
	// settling on the max live UID under loss. Without loss it stays 0.
	Challenges int
	// Announced counts announcements this node started: it won (or, for
	// Dolev–Klawe–Rodeh, named the winner). Ended counts those that ended
	// here: the ELECTED came back, or there was no other live member to
	// send it to. Counted, not read off Status.Announcing, because an
	// announcement can start and end within one call — an observer of
	// Status alone would miss that election's end.
	Announced, Ended int
}

// checkConfig validates what Node and Machine share, and fills defaults.
func checkConfig(cfg *Config) error {
	if cfg.SuspectJitter > 0 && cfg.Rand == nil {
		return errors.New("SuspectJitter needs Rand")
	}
	if cfg.AckTimeout < 0 || cfg.Retries < 0 {
		return errors.New("negative AckTimeout or Retries")
	}
	if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	return nil
}
