package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

func (s *Server) forward(w http.ResponseWriter, r *http.Request, to string, body []byte) {
	hop, err := hops(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if hop >= maxHops {
		http.Error(w, "forwarding loop: the ring metadata is changing, retry", http.StatusServiceUnavailable)
		return
	}
	resp, err := s.proxy(r.Context(), r.Method, to, KeyPath("/kv/", r.PathValue("key")), body, hop+1)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("owner %s unreachable: %v", to, err), http.StatusServiceUnavailable)
		return
	}
	copyResponse(w, resp)
}

func (s *Server) proxy(ctx context.Context, method, to, path string, body []byte, hop int) (*http.Response, error) {
	return s.peerRequest(ctx, method, to, path, body, HeaderHops, strconv.Itoa(hop))
}

// peerRequest sends one request to server to. Addresses come from ring
// metadata, which a peer supplies: a request that cannot even be built is
// an error like any other, never a nil request. header is name, value
// pairs.
func (s *Server) peerRequest(ctx context.Context, method, to, path string, body []byte, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+to+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request to %s: %w", to, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set(HeaderSecret, s.cfg.Secret)
	return s.hc.Do(req)
}

func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", HeaderVersion, "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
