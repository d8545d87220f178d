package leaderapp

import "time"

// Kind is a replica's role.
type Kind string

const (
	Leader     Kind = "leader"
	Follower   Kind = "follower"
	Leaderless Kind = "leaderless"
)

// Role follows the sidecar's answers: who leads, as of when. An answer
// older than stale (the sidecar stopped answering) makes the replica
// leaderless: it neither acts as leader nor forwards to one it cannot
// vouch for. Times come from the caller (deterministic).
type Role struct {
	self   string
	stale  time.Duration
	leader string
	term   uint64
	known  bool // the sidecar reported the leader's term
	at     time.Time
}

// NewRole returns the role of replica self; answers last stale.
func NewRole(self string, stale time.Duration) *Role {
	return &Role{self: self, stale: stale}
}

// Observe records the sidecar's answer at now (Name "" while no one
// leads).
func (r *Role) Observe(now time.Time, ans Answer) {
	r.leader, r.at = ans.Name, now
	r.term, r.known = 0, ans.Term != nil
	if r.known {
		r.term = *ans.Term
	}
}

// Term is the term of the leader last observed, if the sidecar said.
func (r *Role) Term() (uint64, bool) { return r.term, r.known }

// At returns the role at now and the leader it follows.
func (r *Role) At(now time.Time) (Kind, string) {
	switch {
	case r.at.IsZero() || now.Sub(r.at) > r.stale || r.leader == "":
		return Leaderless, ""
	case r.leader == r.self:
		return Leader, r.self
	}
	return Follower, r.leader
}
