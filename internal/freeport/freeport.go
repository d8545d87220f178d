// Package freeport hands out loopback ports for a process this one is
// about to start, which binds the port itself a moment later.
//
// The usual way — listen on port 0, read the port, close — draws from the
// kernel's ephemeral range, the same range every outgoing connection and
// every other listen on port 0 draws from: with tests and experiments
// running side by side, another process took such a port between the
// close and the child's bind (a CI run lost its control plane's etcd to
// "bind: address already in use"). Ports below the ephemeral range are
// taken only by a bind that names them, so a port chosen there at random
// and found free stays free far more reliably; one process never hands
// out the same port twice in a row of recent picks.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the first port considered: below it are the well-known ports
// and the fixed ones local services listen on (Redis 6379, etcd 2379,
// kube-apiserver 6443, the compose stack's 8080 and 8081).
const lowest = 10000

// recent bounds how many handed-out ports are remembered.
const recent = 4096

var (
	mu     sync.Mutex
	given  = map[int]bool{}
	order  []int
	span   [2]int // [first, last] of the range to pick from; zero until read
	noSpan bool   // the ephemeral range leaves no room: ask the kernel
)

// Port returns a loopback TCP port that was free a moment ago and lies
// outside the ephemeral range (where the kernel's ranges allow; otherwise
// a port from the kernel).
func Port() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if span == [2]int{} && !noSpan {
		span, noSpan = pickRange(ephemeralRange())
	}
	if noSpan {
		return kernelPort()
	}
	for range 200 {
		p := span[0] + rand.IntN(span[1]-span[0]+1)
		if given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		remember(p)
		return p, nil
	}
	return 0, fmt.Errorf("free port: none free among 200 tries in %d–%d", span[0], span[1])
}

// Addr is Port as "127.0.0.1:port".
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

func remember(p int) {
	given[p] = true
	order = append(order, p)
	if len(order) > recent {
		delete(given, order[0])
		order = order[1:]
	}
}

func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralRange is the kernel's range for port 0 and outgoing
// connections (Linux's default where it cannot be read).
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if lo, hi, err = parseRange(string(b)); err == nil {
			return lo, hi
		}
	}
	return 32768, 60999
}

func parseRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, errors.New("want two numbers")
	}
	if lo, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	if hi, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("range %d–%d", lo, hi)
	}
	return lo, hi, nil
}

// pickRange is the larger room outside the ephemeral range lo–hi, at
// least 1000 ports from lowest up, or none.
func pickRange(lo, hi int) (span [2]int, none bool) {
	below := [2]int{lowest, lo - 1}
	above := [2]int{max(hi+1, lowest), 65535}
	best := below
	if above[1]-above[0] > below[1]-below[0] {
		best = above
	}
	if best[1]-best[0] < 1000 {
		return [2]int{}, true
	}
	return best, false
}
