// Package faultrelay is a TCP relay between one client and its server
// through which kube-split-brain injects network faults on that client
// alone — an elector and its API server. Cut is a partition (every
// connection dropped, new ones closed at once, while other clients keep
// the server); Delay holds every chunk the client sends for a while before
// it is passed on — a renew that overruns its deadline. TLS passes through
// untouched: the client still verifies the server's certificate. The
// process backend runs one per elector on the host; in a Pod it is
// cmd/faultproxy.
package faultrelay

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ringside/ringside/internal/accept"
)

// Relay relays one listening address to a target.
type Relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
	delay time.Duration
}

// New relays listen (host:port; "127.0.0.1:0" picks a free loopback
// port) to target (host:port).
func New(listen, target string) (*Relay, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go accept.Loop(ln, slog.New(slog.DiscardHandler), func(c net.Conn) { go p.relay(c) })
	return p, nil
}

// Addr is where the client connects.
func (p *Relay) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and closes new ones at once while on.
func (p *Relay) Cut(on bool) {
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

// Delay holds what the client sends for d before passing it on (0: no
// delay).
func (p *Relay) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops the relay and drops its connections.
func (p *Relay) Close() {
	p.ln.Close()
	p.Cut(true)
}

func (p *Relay) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Relay) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Relay) relay(in net.Conn) {
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
	go func() { p.forward(in, out, false); done <- struct{}{} }()
	go func() { p.forward(out, in, true); done <- struct{}{} }()
	<-done // either side ending ends both (the deferred closes)
}

// forward copies src to dst, each read held for the delay in force when
// it arrived if delayed (the client's side). Both directions copy through
// this buffer: io.Copy between two TCP connections splices through a pipe,
// two descriptors that Go keeps in a pool and closes only when a garbage
// collection finalizes them — after a connection flood under a low
// descriptor limit those pipes held every descriptor while the relay sat
// idle, and it could not dial its target again.
func (p *Relay) forward(dst, src net.Conn, delayed bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if delayed {
				time.Sleep(p.delayNow())
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

func (p *Relay) delayNow() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}
