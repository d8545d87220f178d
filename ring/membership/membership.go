// Package membership is the ring metadata the coordinator (ECS) keeps and
// pushes to every server: the members, who coordinates, the replication
// factor, and from them which servers are responsible for a key on the
// consistent-hash ring.
package membership

import (
	"crypto/md5"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ringside/ringside/ring"
)

// DefaultReplicas is R, the number of successors that hold a copy.
const DefaultReplicas = 2

// MaxReplicas bounds R in metadata a peer sends: far beyond any ring
// here, and far from the integer limits (R + 1 copies are counted).
const MaxReplicas = 1 << 16

// Metadata is one version of the ring. Servers are sorted by UID, so
// Servers[i+1] is Servers[i]'s successor on the ring.
type Metadata struct {
	// Round is the election round that made Coordinator; Version counts
	// changes within it. (Round, Version) orders metadata.
	Round       uint64   `json:"round"`
	Version     uint64   `json:"version"`
	Coordinator string   `json:"coordinator"`
	Replicas    int      `json:"replicas"`
	Servers     []string `json:"servers"`

	// ring holds the servers' UIDs in Servers' order. It is built once:
	// every server a push reaches installs it, and building it per server
	// cost a 1,024-server simulation the same index n times per push.
	ring *ring.Ring
}

// New returns validated metadata; servers may come in any order.
func New(round, version uint64, coordinator string, replicas int, servers []string) (*Metadata, error) {
	m := &Metadata{Round: round, Version: version, Coordinator: coordinator, Replicas: replicas, Servers: slices.Clone(servers)}
	return m, m.init()
}

// Decode parses and validates metadata from JSON.
func Decode(b []byte) (*Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("ring metadata: %w", err)
	}
	return &m, m.init()
}

func (m *Metadata) init() error {
	if len(m.Servers) == 0 {
		return fmt.Errorf("ring metadata: servers: empty")
	}
	if m.Replicas < 0 || m.Replicas > MaxReplicas {
		return fmt.Errorf("ring metadata: replicas: %d: want 0 to %d", m.Replicas, MaxReplicas)
	}
	if m.Version == 0 {
		return fmt.Errorf("ring metadata: version: must be positive")
	}
	seen := map[string]bool{}
	for _, s := range m.Servers {
		if err := CheckAddr(s); err != nil {
			return fmt.Errorf("ring metadata: servers: %w", err)
		}
		if seen[s] {
			return fmt.Errorf("ring metadata: servers: %q listed twice", s)
		}
		seen[s] = true
	}
	if !seen[m.Coordinator] {
		return fmt.Errorf("ring metadata: coordinator: %q is not among the servers", m.Coordinator)
	}
	// Each server's UID is hashed once, then the two sorted together: a
	// comparison hashing both sides cost a 1,024-server ring ~20,000 MD5s.
	type member struct {
		uid  ring.UID
		addr string
	}
	members := make([]member, len(m.Servers))
	for i, s := range m.Servers {
		members[i] = member{ring.UIDOf(s), s}
	}
	slices.SortFunc(members, func(a, b member) int { return a.uid.Cmp(b.uid) })
	uids := make([]ring.UID, len(members))
	for i, mb := range members {
		uids[i], m.Servers[i] = mb.uid, mb.addr
	}
	r, err := ring.NewRing(uids)
	if err != nil {
		// Distinct addresses with one MD5: never seen, but not a panic.
		return fmt.Errorf("ring metadata: servers: %w", err)
	}
	m.ring = r
	return nil
}

// CheckAddr validates a server address: host:port (an IPv6 host in
// brackets) with a port in 1…65535. It parses by hand so that the ring's
// pure cores do not depend on package net.
func CheckAddr(s string) error {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return fmt.Errorf("%q: missing port", s)
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") || len(host) < 3 || strings.ContainsAny(host[1:len(host)-1], "[]") {
			return fmt.Errorf("%q: bad bracketed host", s)
		}
	} else if strings.ContainsAny(host, ":[]") {
		return fmt.Errorf("%q: too many colons (bracket an IPv6 host)", s)
	}
	if host == "" {
		return fmt.Errorf("%q: empty host", s)
	}
	if strings.ContainsAny(host, " /?#@\\") || strings.ContainsFunc(host, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return fmt.Errorf("%q: host has characters no address has", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || port[0] == '+' {
		return fmt.Errorf("%q: bad port", s)
	}
	return nil
}

// Encode returns the JSON form.
func (m *Metadata) Encode() []byte {
	b, _ := json.Marshal(m) // plain strings and numbers: cannot fail
	return b
}

// Newer reports whether m supersedes o (o may be nil).
func (m *Metadata) Newer(o *Metadata) bool {
	return o == nil || m.Round > o.Round || m.Round == o.Round && m.Version > o.Version
}

// Epoch names one version of the ring metadata.
type Epoch struct{ Round, Version uint64 }

// Epoch is m's (Round, Version).
func (m *Metadata) Epoch() Epoch { return Epoch{m.Round, m.Version} }

// String is the epoch as peers exchange it, "round.version".
func (e Epoch) String() string { return fmt.Sprintf("%d.%d", e.Round, e.Version) }

// Ring returns the election ring: members in UID order.
func (m *Metadata) Ring() *ring.Ring { return m.ring }

// Addrs maps member UIDs to addresses.
func (m *Metadata) Addrs() map[ring.UID]string {
	out := make(map[ring.UID]string, len(m.Servers))
	for i, s := range m.Servers {
		out[m.ring.Order()[i]] = s
	}
	return out
}

// AddrOf returns the address of the member whose UID is u.
func (m *Metadata) AddrOf(u ring.UID) (string, bool) {
	if i := m.ring.Index(u); i >= 0 {
		return m.Servers[i], true
	}
	return "", false
}

// Has reports whether addr is a member: found by its UID in the ring's
// index, not by a scan of every server.
func (m *Metadata) Has(addr string) bool {
	i := m.ring.Index(ring.UIDOf(addr))
	return i >= 0 && m.Servers[i] == addr
}

// KeyHash places a key on the ring: MD5 of the key, like server UIDs.
func KeyHash(key string) ring.UID { return ring.UIDFromBytes(md5.Sum([]byte(key))) }

// ownerIndex is the first server whose UID is ≥ the key's hash, wrapping:
// each server owns the range (predecessor, itself].
func (m *Metadata) ownerIndex(key string) int {
	h := KeyHash(key)
	uids := m.ring.Order()
	i, _ := slices.BinarySearchFunc(uids, h, ring.UID.Cmp)
	return i % len(uids)
}

// Owner returns the server responsible for key.
func (m *Metadata) Owner(key string) string { return m.Servers[m.ownerIndex(key)] }

// Responsible returns the owner of key followed by its replicas, the next
// Replicas successors (fewer on a small ring).
func (m *Metadata) Responsible(key string) []string { return m.ResponsibleAt(m.ownerIndex(key)) }

// ResponsibleAt returns the servers responsible for the arc Servers[i]
// owns: Servers[i] and its Replicas successors (fewer on a small ring).
func (m *Metadata) ResponsibleAt(i int) []string {
	k := min(m.Replicas+1, len(m.Servers))
	out := make([]string, k)
	for j := range k {
		out[j] = m.Servers[(i+j)%len(m.Servers)]
	}
	return out
}

// With returns the next version with addr added (m itself if present).
func (m *Metadata) With(addr string) (*Metadata, error) {
	if m.Has(addr) {
		return m, nil
	}
	return New(m.Round, m.Version+1, m.Coordinator, m.Replicas, append(slices.Clone(m.Servers), addr))
}

// Without returns the next version with the given servers removed.
func (m *Metadata) Without(addrs ...string) (*Metadata, error) {
	keep := slices.DeleteFunc(slices.Clone(m.Servers), func(s string) bool { return slices.Contains(addrs, s) })
	return New(m.Round, m.Version+1, m.Coordinator, m.Replicas, keep)
}

// TakeOver returns the metadata of a new coordinator elected in round:
// itself as coordinator, the old coordinator removed when removeOld.
func (m *Metadata) TakeOver(self string, round uint64, removeOld bool) (*Metadata, error) {
	keep := slices.DeleteFunc(slices.Clone(m.Servers), func(s string) bool { return removeOld && s == m.Coordinator && s != self })
	if !slices.Contains(keep, self) {
		keep = append(keep, self)
	}
	return New(round, 1, self, m.Replicas, keep)
}
