package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

func (s *Server) handleReplicate(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		s.badRequest(w, "replicate", err)
		return
	}
	v, err := parseVersion(r.Header.Get(HeaderVersion))
	if err != nil {
		s.badRequest(w, "replicate", err)
		return
	}
	if err := s.staleOwner(r, key); errors.Is(err, errStaleOwner) {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	} else if err != nil {
		s.badRequest(w, "replicate", err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, kv.MaxValueLen+1))
	if err != nil || len(body) > kv.MaxValueLen {
		s.badRequest(w, "replicate", fmt.Errorf("body: unreadable or over %d bytes", kv.MaxValueLen))
		return
	}
	if _, err := s.store.Apply(key, kv.Entry{Value: body, Version: v, Deleted: r.Method == http.MethodDelete}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request) {
	select {
	case s.transfers <- struct{}{}:
		defer func() { <-s.transfers }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("busy: %d data moves already in progress", maxTransfers), http.StatusServiceUnavailable)
		return
	}
	const limit = transferChunk + kv.MaxKeyLen + kv.MaxValueLen + 64 // a chunk plus the record that crossed it
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		s.badRequest(w, "transfer", err)
		return
	}
	if len(body) > limit {
		s.m.malformed.WithLabelValues("transfer").Inc()
		http.Error(w, fmt.Sprintf("transfer: over %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	items, err := DecodeItems(body)
	if err != nil {
		s.badRequest(w, "transfer", err)
		return
	}
	for _, it := range items {
		if _, err := s.store.Apply(it.Key, it.Entry); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		s.badRequest(w, "metadata", err)
		return
	}
	nm, err := membership.Decode(body)
	if err != nil {
		s.badRequest(w, "metadata", err)
		return
	}
	var applied bool
	if err := s.do(r.Context(), func() { applied = s.installMeta(nm) }); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !applied {
		http.Error(w, "stale metadata: a newer version is in force", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRing(w http.ResponseWriter, r *http.Request) {
	meta := s.currentMeta()
	if meta == nil {
		http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
		return
	}
	body := meta.Encode()
	w.Header().Set("Content-Type", "application/json")
	// Anyone may ask (clients find the ring here), so the question
	// carries no secret; a server that would act on the answer — leave its
	// ring and join this one — checks that a member of a ring with the
	// same secret gave it.
	w.Header().Set(HeaderProof, proof(s.cfg.Secret, body))
	w.Write(body)
}

// proof is the HMAC of body under the cluster secret, hex.
func proof(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
