package ringnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ringside/ringside/internal/profilefetch"
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

// Profile saves a profile of the server at addr (kind cpu or block, over
// d) to path; secret is the ring's cluster secret, which the profile
// endpoint asks for.
func Profile(ctx context.Context, addr, secret, kind string, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/internal/profile/%s?seconds=%d", addr, kind, max(1, int(d.Seconds())))
	if err := profilefetch.Save(ctx, url, http.Header{server.HeaderSecret: {secret}}, path); err != nil {
		return fmt.Errorf("%s profile of %s: %w", kind, addr, err)
	}
	return nil
}
