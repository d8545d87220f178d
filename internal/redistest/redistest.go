// Package redistest runs a real redis-server for tests: on a free
// loopback port, without persistence, stopped at the end of the test. A
// missing redis-server fails the test (CI installs it; nothing is skipped).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/proc"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	t    testing.TB
	proc *proc.Proc
}

// Start runs redis-server and waits until it answers PING.
func Start(t testing.TB) *Server {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), t: t}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatalf("redis-server not found (apt-get install redis-server): %v", err)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.t.TempDir())
	p, err := proc.Start(cmd, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.proc = p
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s not ready: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (its data is gone: no persistence).
func (s *Server) Stop() {
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}

// Restart stops and starts the server on the same port.
func (s *Server) Restart() {
	s.Stop()
	s.start()
}

// Client returns a client closed at the end of the test.
func (s *Server) Client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	s.t.Cleanup(func() { rdb.Close() })
	return rdb
}

func (s *Server) String() string { return fmt.Sprintf("redis-server at %s", s.Addr) }
