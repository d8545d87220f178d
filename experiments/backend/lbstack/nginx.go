package lbstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/proc"
)

// Nginx is Debian's nginx as a reverse proxy in front of the same workers,
// the baseline the balancer's throughput is measured against.
type Nginx struct {
	*proc.Proc
	Addr string // where it listens
	errb bytes.Buffer
}

// StartNginx runs nginx with weighted round robin over addrs (weights are
// rounded to integers ≥ 1, nginx's form) and upstream keep-alive, so both
// proxies reuse connections to the workers. It sets the X-Forwarded-For,
// -Host and -Proto headers the balancer sets, as a reverse proxy in front
// of applications is configured to: both proxies then send the workers
// the same requests, and neither does less work per request than the
// other (without them nginx sent three headers fewer, which the workers
// also parsed).
func StartNginx(ctx context.Context, dir string, addrs []string, weights []float64) (*Nginx, error) {
	bin := NginxBinary()
	if bin == "" {
		return nil, errors.New("nginx not found (apt-get install nginx, or leave it out of --baselines)")
	}
	// nginx reads -c relative to its prefix (-p): a relative results
	// folder (make experiments' --out results) would be looked for twice
	// over.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	var up strings.Builder
	for i, a := range addrs {
		fmt.Fprintf(&up, "    server %s weight=%d max_fails=0;\n", a, max(1, int(math.Round(weights[i]))))
	}
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
user root;
pid %[1]s/nginx.pid;
error_log stderr error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream workers {
%[2]s    keepalive 256;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://workers;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`, dir, up.String(), addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	n := &Nginx{Addr: addr}
	cmd := exec.Command(bin, "-p", dir, "-c", path)
	cmd.Stderr = &n.errb
	if n.Proc, err = proc.Start(cmd, nil); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return n, nil
		}
		select {
		case <-n.Done():
			return nil, fmt.Errorf("nginx exited: %s", strings.TrimSpace(n.errb.String()))
		case <-ctx.Done():
			n.Shutdown()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.Shutdown()
			return nil, fmt.Errorf("nginx not listening on %s", addr)
		}
	}
}

// NginxBinary finds nginx on PATH or where Debian puts it (/usr/sbin is
// not on every user's PATH).
func NginxBinary() string {
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if bin, err := exec.LookPath(p); err == nil {
			return bin
		}
	}
	return ""
}

// Shutdown stops nginx fast (SIGINT) and waits for it.
func (n *Nginx) Shutdown() {
	n.Stop(os.Interrupt, 3*time.Second) // fast shutdown (SIGINT) of master and workers
}
