package server

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strconv"
	"sync"
)

// Profiles of a running server, for the experiments that ask where its
// time goes (ring-failover keeps them beside its CSV). Peer-only: a
// profile shows what the server is doing, and taking one costs it CPU.
//
//	GET /internal/profile/cpu?seconds=N    a CPU profile over N seconds
//	GET /internal/profile/block?seconds=N  where goroutines waited (channels,
//	                                       locks, select) over N seconds
//	GET /internal/profile/trace?seconds=N  an execution trace over N seconds:
//	                                       when each goroutine was woken (by
//	                                       the network, a timer, a lock) and
//	                                       ran, on the monotonic clock every
//	                                       process shares (tools/hop-trace)
//
// Block profiling slows every blocking operation, so it is on only while
// such a request runs, one at a time.

// maxProfileSeconds keeps a profile inside the server's write timeout.
const maxProfileSeconds = 50

var blockProfiling sync.Mutex

func (s *Server) handleProfile(w http.ResponseWriter, r *http.Request) {
	secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
	if err != nil || secs < 1 || secs > maxProfileSeconds {
		s.badRequest(w, "profile", fmt.Errorf("seconds %q: want a whole number from 1 to %d", r.URL.Query().Get("seconds"), maxProfileSeconds))
		return
	}
	switch kind := r.PathValue("kind"); kind {
	case "cpu":
		pprof.Profile(w, r) // refuses a second profile at once itself
	case "trace":
		pprof.Trace(w, r) // likewise a second trace
	case "block":
		if !blockProfiling.TryLock() {
			http.Error(w, "a block profile is being taken already", http.StatusConflict)
			return
		}
		defer blockProfiling.Unlock()
		runtime.SetBlockProfileRate(1)
		defer runtime.SetBlockProfileRate(0)
		pprof.Handler("block").ServeHTTP(w, r) // the difference over seconds
	default:
		http.Error(w, fmt.Sprintf("profile %q: want cpu, block or trace", kind), http.StatusNotFound)
	}
}
