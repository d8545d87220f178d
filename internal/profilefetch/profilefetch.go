// Package profilefetch saves a profile a running server serves over HTTP
// (net/http/pprof's format), for the experiments that keep one beside
// their CSV: the balancer's in lb-proxy, a ringnode's in ring-failover.
package profilefetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// maxBytes bounds what is read: a profile is kilobytes, a server that
// answers with more is not serving one.
const maxBytes = 64 << 20

// Save GETs url with header and writes the body to path; any answer but
// 200 is an error quoting the server's reason.
func Save(ctx context.Context, url string, header http.Header, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return os.WriteFile(path, body, 0o644)
}
