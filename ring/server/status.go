package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/ringside/ringside/ring"
)

// Status is the /internal/status document.
type Status struct {
	Addr        string   `json:"addr"`
	UID         string   `json:"uid"`
	Election    string   `json:"election"` // the algorithm it runs
	Leader      string   `json:"leader"`   // address, when it is a member
	LeaderUID   string   `json:"leader_uid"`
	Coordinator bool     `json:"coordinator"`
	Round       uint64   `json:"round"`
	Participant bool     `json:"participant"`
	MetaRound   uint64   `json:"meta_round"`
	MetaVersion uint64   `json:"meta_version"`
	Servers     []string `json:"servers"`
	Keys        int      `json:"keys"`
	// Leased: a majority of the ring confirmed this server within the
	// lease term, so it serves as an owner (lease.go).
	Leased bool             `json:"leased"`
	Moved  int64            `json:"keys_moved"`
	Sent   map[string]int64 `json:"sent"`
	Events Events           `json:"events"`
	Time   int64            `json:"time_ns"`
}

// Snapshot returns the server's status.
func (s *Server) Snapshot() Status {
	s.mu.RLock()
	st, meta, ev := s.status, s.meta, s.events
	s.mu.RUnlock()
	out := Status{Addr: s.cfg.Addr, UID: s.self.String(), Election: s.alg.Name, Round: st.Round, Participant: st.Participant,
		Keys: s.store.Len(), Moved: s.moved.Load(), Events: ev, Sent: map[string]int64{}, Time: time.Now().UnixNano()}
	out.Leased = s.leaseValid()
	if !st.Leader.IsZero() {
		out.LeaderUID = st.Leader.String()
		out.Coordinator = st.Leader == s.self && !st.Announcing
	}
	if meta != nil {
		out.MetaRound, out.MetaVersion, out.Servers = meta.Round, meta.Version, meta.Servers
		for _, a := range meta.Servers {
			if ring.UIDOf(a) == st.Leader {
				out.Leader = a
			}
		}
	}
	for t := range s.sent {
		if n := s.sent[t].Load(); n > 0 {
			out.Sent[typeName(ring.MsgType(t))] = n
		}
	}
	// Per-hop acknowledgement's own messages, apart from the algorithm's.
	if n := s.hopAcks.Load(); n > 0 {
		out.Sent["hop_ack"] = n
	}
	if n := s.resent.Load(); n > 0 {
		out.Sent["retransmission"] = n
	}
	return out
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.Snapshot())
}
