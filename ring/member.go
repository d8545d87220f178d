package ring

import (
	"fmt"
	"time"
)

// member is the state every elector shares, Chang–Roberts' Node and the
// Machine that drives the other algorithms alike: its configuration and
// view of the ring, its election status and counters, the failure
// detector and heartbeat schedule, per-hop acknowledgement, and the
// messages of the call being handled.
type member struct {
	liveness
	cfg Config

	st            Status
	electionTimer time.Duration // 0 when disarmed
	det           *Detector
	nextBeat      time.Duration
	stats         Stats
	out           []Message
	now           time.Duration // of the call being handled
	acks          hopAcks
}

// init validates cfg and sets the member at rest: not participating,
// following cfg.Leader if set. what names the elector in errors.
func (m *member) init(cfg Config, what string) error {
	if err := checkConfig(&cfg); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	m.cfg, m.liveness = cfg, liveness{self: cfg.Self}
	m.acks = hopAcks{timeout: cfg.AckTimeout, retries: cfg.Retries}
	if err := m.setRing(cfg.Ring); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	m.st.Round, m.st.Leader = cfg.Round, cfg.Leader
	if cfg.SuspectTimeout > 0 {
		m.det = NewDetector(cfg.Now, cfg.SuspectTimeout, cfg.SuspectJitter, cfg.Rand)
	}
	if cfg.Leader == cfg.Self {
		m.nextBeat = cfg.Now
	}
	return nil
}

// Status returns the member's election state.
func (m *member) Status() Status { return m.st }

// Leader returns the known leader; ok is false while unknown.
func (m *member) Leader() (UID, bool) { return m.st.Leader, !m.st.Leader.IsZero() }

// Stats returns counters of the member's own actions.
func (m *member) Stats() Stats { return m.stats }

// beating reports whether this member leads and sends heartbeats.
func (m *member) beating() bool {
	return m.cfg.HeartbeatInterval > 0 && m.st.Leader == m.self && !m.st.Announcing
}

// beat sends the coordinator's heartbeat to every live member when due.
func (m *member) beat(now time.Duration) {
	if !m.beating() || now < m.nextBeat {
		return
	}
	m.nextBeat = now + m.cfg.HeartbeatInterval
	for i, u := range m.ring.order {
		if i != m.pos && !m.down[i] {
			hb := Message{Type: MsgHeartbeat, From: m.self, To: u, Cand: m.self, Round: m.st.Round}
			m.out = append(m.out, hb)
			m.acks.track(now, hb)
		}
	}
}

// deadline is the earliest instant the timers every elector shares have
// work: the election timeout, a retransmission, the failure detector, the
// next heartbeat.
func (m *member) deadline() (at time.Duration, ok bool) {
	consider := func(t time.Duration) {
		if !ok || t < at {
			at, ok = t, true
		}
	}
	if m.electionTimer > 0 {
		consider(m.electionTimer)
	}
	if due, dok := m.acks.deadline(); dok {
		consider(due)
	}
	if m.det != nil && m.st.Leader != m.self && !m.st.Participant && !m.st.Announcing {
		consider(m.det.Deadline())
	}
	if m.beating() {
		consider(m.nextBeat)
	}
	return at, ok
}

// suspectQuietLeader marks the coordinator down when another server has
// started an election and this one has missed the coordinator's last two
// heartbeats too: on its own evidence the coordinator is gone, and a
// message sent to a vanished host would be lost silently. A coordinator
// this node still hears stays in the ring, so a false suspicion elsewhere
// cannot push a live max UID out of the election.
func (m *member) suspectQuietLeader(now time.Duration) {
	l := m.st.Leader
	if m.det == nil || m.cfg.HeartbeatInterval <= 0 || l.IsZero() || l == m.self {
		return
	}
	if m.det.Silence(now) > 2*m.cfg.HeartbeatInterval {
		m.MarkDown(l)
	}
}
