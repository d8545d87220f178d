package ringnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ringside/ringside/ring/server"
)

// GetStatus reads a server's /internal/status.
func GetStatus(ctx context.Context, addr string) (server.Status, error) {
	var st server.Status
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/internal/status", nil)
	resp, err := healthClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %s: %s", addr, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("status %s: %w", addr, err)
	}
	return st, nil
}

// StatusAll reads the status of every server in addrs.
func StatusAll(ctx context.Context, addrs []string) (map[string]server.Status, error) {
	out := make(map[string]server.Status, len(addrs))
	for _, a := range addrs {
		st, err := GetStatus(ctx, a)
		if err != nil {
			return nil, err
		}
		out[a] = st
	}
	return out, nil
}
