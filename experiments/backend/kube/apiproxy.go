package kube

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/internal/accept"
)

// APIProxy is a TCP relay between one elector and the API server, through
// which kube-split-brain injects its network faults on that elector
// alone: Cut is an API partition (every connection dropped, new ones
// closed at once, while the other electors keep the server), Delay holds
// every chunk the elector sends for a while before it is passed on — a
// renew that overruns its deadline. TLS passes through untouched: the
// elector still verifies the API server's certificate.
type APIProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
	delay time.Duration
}

// NewAPIProxy relays a loopback port to target (host:port).
func NewAPIProxy(target string) (*APIProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &APIProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go accept.Loop(ln, slog.New(slog.DiscardHandler), func(c net.Conn) { go p.relay(c) })
	return p, nil
}

// Addr is where the elector connects.
func (p *APIProxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and closes new ones at once while on.
func (p *APIProxy) Cut(on bool) {
	p.mu.Lock()
	p.cut = on
	var drop []net.Conn
	if on {
		for c := range p.conns {
			drop = append(drop, c)
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
}

// Delay holds what the elector sends for d before passing it on (0: no
// delay).
func (p *APIProxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops the relay and drops its connections.
func (p *APIProxy) Close() {
	p.ln.Close()
	p.Cut(true)
}

func (p *APIProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *APIProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *APIProxy) relay(in net.Conn) {
	if !p.track(in) {
		in.Close()
		return
	}
	defer p.untrack(in)
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { io.Copy(in, out); done <- struct{}{} }()
	go func() { p.forward(out, in); done <- struct{}{} }()
	<-done // either side ending ends both (the deferred closes)
}

// forward copies the elector's bytes to the server, each read held for
// the delay in force when it arrived.
func (p *APIProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			if d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// ProxiedKubeconfig writes a copy of kubeconfig whose every cluster is
// reached through proxy, to path.
func ProxiedKubeconfig(kubeconfig, path string, proxy *APIProxy) error {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return err
	}
	if len(cfg.Clusters) == 0 {
		return errors.New("kubeconfig names no cluster")
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + proxy.Addr()
	}
	return clientcmd.WriteToFile(*cfg, path)
}
