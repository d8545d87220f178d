package lbstack

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/proc"
	"github.com/ringside/ringside/internal/profilefetch"
)

// Balancer is cmd/balancer as a process, as nginx is one.
type Balancer struct {
	*proc.Proc
	Addr, Admin string // the proxy's address, the admin API's
}

// StartBalancer runs bin (cmd/balancer) with picker over addrs, equally
// weighted, and returns once its admin API answers.
func StartBalancer(ctx context.Context, bin, picker string, addrs []string, args ...string) (*Balancer, error) {
	ports := make([]string, 2)
	for i := range ports {
		var err error
		if ports[i], err = freeport.Addr(); err != nil {
			return nil, err
		}
	}
	var ws []string
	for _, a := range addrs {
		ws = append(ws, a+"=1")
	}
	var errb bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--addr", ports[0], "--admin", ports[1], "--picker", picker, "--workers", strings.Join(ws, ","), "--log-level", "warn"}, args...)...)
	cmd.Stderr = &errb
	pr, err := proc.Start(cmd, nil)
	if err != nil {
		return nil, err
	}
	b := &Balancer{Proc: pr, Addr: ports[0], Admin: ports[1]}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + b.Admin + "/healthz"); err == nil {
			resp.Body.Close()
			return b, nil
		}
		if pr.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			pr.Kill()
			return nil, fmt.Errorf("balancer did not come up: %s", strings.TrimSpace(errb.String()))
		}
	}
}

// Profile saves a CPU profile of the balancer over d.
func (b *Balancer) Profile(ctx context.Context, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", b.Admin, max(1, int(d.Seconds())))
	return profilefetch.Save(ctx, url, nil, path)
}
