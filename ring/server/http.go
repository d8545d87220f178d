package server

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// Headers of the internal protocol.
const (
	HeaderVersion = "X-Ringside-Version" // entry version on replication and reads
	HeaderOwner   = "X-Ringside-Owner"   // the owner sending a replication
	HeaderEpoch   = "X-Ringside-Epoch"   // its metadata's round.version
	HeaderHops    = "X-Ringside-Hops"    // forwarding depth, to stop loops on stale metadata
	HeaderSecret  = "X-Ringside-Secret"  // the cluster secret, on every peer-only request
	HeaderProof   = "X-Ringside-Proof"   // HMAC-SHA256 of an answer's body under the cluster secret
	maxHops       = 2
	// maxTransfers bounds the data moves a server accepts at once: each
	// buffers up to two chunks.
	maxTransfers = 4
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /kv/{key...}", s.handleWrite)
	mux.HandleFunc("DELETE /kv/{key...}", s.handleWrite)
	mux.HandleFunc("GET /kv/{key...}", s.handleRead)
	// Peer-only endpoints: they bypass the owner, set versions, change
	// the ring. Only a server with the cluster secret may call them.
	mux.HandleFunc("GET /internal/kv/{key...}", s.peerOnly(s.handleLocalRead))
	mux.HandleFunc("PUT /internal/replicate/{key...}", s.peerOnly(s.handleReplicate))
	mux.HandleFunc("DELETE /internal/replicate/{key...}", s.peerOnly(s.handleReplicate))
	mux.HandleFunc("POST /internal/transfer", s.peerOnly(s.handleTransfer))
	mux.HandleFunc("POST /internal/pull", s.peerOnly(s.handlePull))
	mux.HandleFunc("PUT /internal/metadata", s.peerOnly(s.handleMetadata))
	mux.HandleFunc("POST /internal/join", s.peerOnly(s.handleJoin))
	mux.HandleFunc("GET /internal/profile/{kind}", s.peerOnly(s.handleProfile))
	// Read-only views, open: smart clients read the ring, experiments the status.
	mux.HandleFunc("GET /internal/ring", s.handleRing)
	mux.HandleFunc("GET /internal/status", s.handleStatus)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.currentMeta() == nil {
			http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

// peerOnly refuses a request that does not carry the cluster secret.
func (s *Server) peerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(HeaderSecret)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Secret)) != 1 {
			s.m.malformed.WithLabelValues("unauthorised").Inc()
			http.Error(w, "peer-only endpoint: the "+HeaderSecret+" header is missing or wrong (servers share RINGNODE_SECRET)", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func (s *Server) currentMeta() *membership.Metadata {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta
}

func (s *Server) badRequest(w http.ResponseWriter, what string, err error) {
	s.m.malformed.WithLabelValues(what).Inc()
	http.Error(w, what+": "+err.Error(), http.StatusBadRequest)
}

// statusWriter remembers the status code for the request metric.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

func (s *Server) count(op string, w *statusWriter) {
	s.m.requests.WithLabelValues(op, strconv.Itoa(w.code)).Inc()
}

// KeyPath is the request path of key under prefix ("/kv/",
// "/internal/replicate/"). Keys are any bytes: every hop escapes them, so
// "a?b" stays one key and "%zz" stays a key, not a broken escape.
func KeyPath(prefix, key string) string { return prefix + kv.EscapeKey(key) }

func checkKey(key string) error {
	if key == "" {
		return errors.New("key: empty")
	}
	if len(key) > kv.MaxKeyLen {
		return fmt.Errorf("key: %d bytes, limit %d", len(key), kv.MaxKeyLen)
	}
	return nil
}

// hops reads a request's forwarding depth: none is 0; anything but a
// small non-negative number is refused (a negative one would lift the
// loop guard for a client that sets it).
func hops(r *http.Request) (int, error) {
	v := r.Header.Get(HeaderHops)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxHops {
		return 0, fmt.Errorf("%s %q: want 0 to %d", HeaderHops, v, maxHops)
	}
	return n, nil
}

var errStaleOwner = errors.New("stale owner")
