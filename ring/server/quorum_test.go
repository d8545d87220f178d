package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
	"github.com/ringside/ringside/ring/wire"
)

// keyOwnedBy returns a key whose owner is Servers[i] under meta.
func keyOwnedBy(t *testing.T, meta *membership.Metadata, i int) string {
	t.Helper()
	for k := range 100000 {
		key := fmt.Sprintf("k%d", k)
		if meta.Owner(key) == meta.Servers[i] {
			return key
		}
	}
	t.Fatalf("no key owned by %s", meta.Servers[i])
	return ""
}

// A ring of seven (R = 2) cut in two: three ring neighbours — every holder
// of one arc — on one side, four on the other. Before the majority rule
// both sides went on serving that arc. Now the three lose their serving
// lease and serve nothing; the four may remove all but one of them (the
// arc's last holder) and so serve only the keys whose servers are all on
// their side. Nothing is acknowledged on both sides, and healed, the ring
// serves every key with its last acknowledged value.
func TestAMinorityWithAWholeArcServesNothing(t *testing.T) {
	nodes := startRing(t, 7)
	meta := nodes[0].currentMeta()
	byAddr := map[string]*node{}
	for _, n := range nodes {
		byAddr[n.Addr()] = n
	}
	var minority, majority []*node
	for i, a := range meta.Servers {
		if i < 3 {
			minority = append(minority, byAddr[a])
		} else {
			majority = append(majority, byAddr[a])
		}
	}
	inMinority := keyOwnedBy(t, meta, 0) // held by Servers[0], [1] and [2] alone
	inMajority := keyOwnedBy(t, meta, 3) // held by Servers[3], [4] and [5]
	for _, key := range []string{inMinority, inMajority} {
		code, msg := do(t, http.MethodPut, "http://"+nodes[0].Addr()+"/kv/"+key, []byte("before"))
		require.Equal(t, http.StatusNoContent, code, msg)
	}

	for _, a := range minority {
		for _, b := range majority {
			testNet.Cut(a.Addr(), b.Addr())
		}
	}
	require.Eventually(t, func() bool {
		for _, n := range minority {
			if n.Snapshot().Leased {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the minority loses its serving lease")
	// The majority elects (if it lost its coordinator), suspects the
	// minority and would remove it, but every server of the minority holds
	// the arc Servers[0] owns with nobody else: they stay members.
	require.Eventually(t, func() bool {
		code, _ := do(t, http.MethodPut, "http://"+majority[0].Addr()+"/kv/"+inMajority, []byte("during"))
		return code == http.StatusNoContent
	}, 10*time.Second, 20*time.Millisecond, "the majority serves the keys it holds")
	suspect := testConfig(newAddr(), "", nil).SuspectTimeout
	// Safety over a window: four suspect timeouts, long enough for any
	// removal the majority would make (it suspects after one). A slow
	// machine covers less of it, never reports a false failure.
	deadline := time.Now().Add(4 * suspect)
	for time.Now().Before(deadline) {
		for _, n := range majority {
			// One of the three must stay: it may be the arc's last
			// holder. (The others may leave, as their detectors fire one
			// by one, each time leaving a holder.)
			m := n.currentMeta()
			kept := 0
			for _, a := range minority {
				if m.Has(a.Addr()) {
					kept++
				}
			}
			require.Positive(t, kept, "%s removed every holder of an arc: %s", n.Addr(), m.Encode())
		}
		for _, via := range nodes {
			code, msg := doOnce(t, http.MethodPut, "http://"+via.Addr()+"/kv/"+inMinority, []byte("during"))
			require.NotEqual(t, http.StatusNoContent, code, "a write to the minority's arc via %s was acknowledged: %s (its metadata %s, minority %v, owner there %s)",
				via.Addr(), msg, via.currentMeta().Encode(), meta.Servers[:3], via.currentMeta().Owner(inMinority))
		}
	}

	for _, a := range minority {
		for _, b := range majority {
			testNet.Heal(a.Addr(), b.Addr())
		}
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if !n.Snapshot().Leased || len(n.currentMeta().Servers) != 7 {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "healed: one ring of seven, every server leased: %v", rings(nodes))
	want := map[string]string{inMinority: "before", inMajority: "during"}
	for key, val := range want {
		require.Eventually(t, func() bool {
			code, body := do(t, http.MethodGet, "http://"+nodes[6].Addr()+"/kv/"+key, nil)
			return code == http.StatusOK && body == val
		}, 10*time.Second, 20*time.Millisecond, "%s reads %q", key, val)
	}
}

// rings describes each server's view, for a failure message.
func rings(nodes []*node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, fmt.Sprintf("%s leased=%v %s", n.Addr(), n.Snapshot().Leased, n.currentMeta().Encode()))
	}
	return out
}

// The lease question, as it travels between members: a member is
// counted, anyone else is not, and either way the answer says where this
// server last finished its data moves; an answer counts only from a member,
// for a round asked, and only when well formed.
func TestLeaseAnswers(t *testing.T) {
	nodes := startRing(t, 3)
	s := nodes[0].Server
	meta := s.currentMeta()
	ask := func(from string) wire.LeaseAnswer { return s.answerLease(ring.UIDOf(from), 9) }
	want := [2]uint64{meta.Round, meta.Version}
	require.Eventually(t, func() bool {
		a := ask(nodes[1].Addr())
		return a.Counted && a.HasRebalanced && a.Rebalanced == want && a.Round == 9
	}, 5*time.Second, 10*time.Millisecond, "a member is counted; the answer carries the rebalanced epoch")
	stranger := ask("10.9.9.9:7000")
	assert.False(t, stranger.Counted)
	assert.Equal(t, want, stranger.Rebalanced)

	// Answers to a round this test asks itself: a stranger's yes and a
	// malformed one leave it short of a majority; one member's makes it
	// (asked again should the server's own asks have overwritten it).
	valid := func() bool {
		s.leaseMu.Lock()
		defer s.leaseMu.Unlock()
		return s.lease.Valid(s.now() + time.Hour)
	}
	require.Eventually(t, func() bool {
		s.leaseMu.Lock()
		n := s.lease.Ask(s.now() + time.Hour)
		s.leaseMu.Unlock()
		yes := wire.LeaseAnswer{Round: n, Counted: true}
		s.onLease(yes.Message(ring.UIDOf("10.9.9.9:7000"), s.self))
		bad := yes.Message(ring.UIDOf(nodes[1].Addr()), s.self)
		bad.Kind = 0x40
		s.onLease(bad)
		badAsk := wire.LeaseAsk{Round: 1, Answer: yes, HasAnswer: true}.Message(ring.UIDOf(nodes[1].Addr()), s.self)
		badAsk.Kind |= 0x40 // a flag no version defines: the whole frame is refused, its answer too
		s.onLease(badAsk)
		if valid() {
			t.Error("a stranger's or a malformed answer confirmed the lease")
			return true
		}
		// A member's answer riding on its ask counts as one on its own.
		s.onLease(wire.LeaseAsk{Round: 1, Answer: yes, HasAnswer: true}.Message(ring.UIDOf(nodes[2].Addr()), s.self))
		return valid()
	}, 5*time.Second, 10*time.Millisecond, "a member's answer completes a majority")
}

// A profile is the peers' to take, and comes back in pprof's gzipped
// format (a trace in the runtime's own); a block profile while another is
// being taken is refused.
func TestProfiles(t *testing.T) {
	nodes := startRing(t, 1)
	url := "http://" + nodes[0].Addr() + "/internal/profile/"
	resp, _ := peerDo(t, http.MethodGet, url+"cpu?seconds=1", "", "")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "no secret, no profile")

	blockProfiling.Lock() // as a block profile in progress holds it
	resp, body := peerDo(t, http.MethodGet, url+"block?seconds=1", "", testSecret)
	blockProfiling.Unlock()
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Contains(t, body, "a block profile is being taken already")

	for _, kind := range []string{"block", "cpu"} {
		resp, body := peerDo(t, http.MethodGet, url+kind+"?seconds=1", "", testSecret)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", kind, body)
		zr, err := gzip.NewReader(strings.NewReader(body))
		require.NoError(t, err, "%s: a gzipped profile", kind)
		raw, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.NotEmpty(t, raw, kind)
	}
	resp, body = peerDo(t, http.MethodGet, url+"trace?seconds=1", "", testSecret)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Regexp(t, `^go 1\.\d+ trace\x00`, body, "an execution trace's header")
}

// Lease answers ride on the answerer's own asks, two frames a pair and
// heartbeat, when the term leaves room for the wait (the tests' 300 ms
// suspect timeout and 50 ms heartbeat: a 200 ms term); with a term under
// three heartbeats every ask is answered at once. Either way the servers
// become leased.
func TestLeaseAnswersRideOnAsks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		suspect time.Duration
		ride    bool
	}{{"riding", 300 * time.Millisecond, true}, {"at once", 175 * time.Millisecond, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*node
			for i := range 3 {
				addr := newAddr()
				var join []string
				if i > 0 {
					join = []string{nodes[0].Addr()}
				}
				cfg := testConfig(addr, t.TempDir(), testNet.Host(addr), join...)
				cfg.SuspectTimeout = tc.suspect
				nodes = append(nodes, run(t, cfg))
			}
			require.Eventually(t, func() bool {
				for _, n := range nodes {
					if m := n.currentMeta(); m == nil || len(m.Servers) != 3 || !n.Snapshot().Leased {
						return false
					}
				}
				return true
			}, 10*time.Second, 10*time.Millisecond, "a leased ring of three")
			s := nodes[1].Server
			asks, answers := counter(s.m.leaseAsks), counter(s.m.leaseAnswers)
			require.Eventually(t, func() bool { return counter(s.m.leaseAsks)-asks >= 2*5 }, 10*time.Second, 10*time.Millisecond,
				"five rounds of asks to the two others")
			if tc.ride {
				assert.Zero(t, counter(s.m.leaseAnswers)-answers, "no answer on its own")
			} else {
				assert.GreaterOrEqual(t, counter(s.m.leaseAnswers)-answers, float64(2*4), "every ask answered at once")
			}
		})
	}
}
