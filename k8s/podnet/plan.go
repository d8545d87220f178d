// Package podnet is the pod network of ringside's kind node image: each
// node's pods live on a bridge with the node's own pod range
// (Node.spec.podCIDRs, given out by the controller manager), and each node
// routes every other node's range to that node's address. The nodes share
// one Docker network, so one hop is all a route needs — the same design as
// kind's kindnetd, with Debian's bridge and host-local CNI plugins.
//
// Plan is the pure core: from the node list to the desired CNI config and
// routes. cmd/podnet watches the nodes, applies the plan with `ip route`
// and writes the config; the DaemonSet is k8s/node/kind/default-cni.yaml.
package podnet

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

// Node is what the plan needs of a Kubernetes Node.
type Node struct {
	Name       string
	InternalIP string   // status.addresses[type=InternalIP], IPv4
	PodCIDRs   []string // spec.podCIDRs
}

// Route sends a peer node's pod range to that node.
type Route struct {
	Dst netip.Prefix `json:"dst"`
	Via netip.Addr   `json:"gateway"`
}

func (r Route) String() string { return r.Dst.String() + " via " + r.Via.String() }

// Plan is the desired state of one node.
type Plan struct {
	Subnets []netip.Prefix // this node's pod ranges, for host-local
	Routes  []Route        // every other node's ranges, sorted by Dst
}

// Compute plans the network of node self. A node whose fields are not
// usable yet (no pod range assigned, no address) or are malformed is left
// out with an error naming it; the rest of the plan stands, so one bad
// Node object does not cut the others off.
func Compute(self string, nodes []Node) (Plan, []error) {
	var p Plan
	var errs []error
	for _, n := range nodes {
		subnets, err := prefixes(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n.Name == self {
			p.Subnets = subnets
			continue
		}
		via, err := netip.ParseAddr(n.InternalIP)
		if err != nil || !via.Is4() {
			errs = append(errs, fmt.Errorf("node %q: internal IP %q is not an IPv4 address", n.Name, n.InternalIP))
			continue
		}
		for _, s := range subnets {
			p.Routes = append(p.Routes, Route{Dst: s, Via: via})
		}
	}
	// A range claimed twice (or overlapping this node's own) must not be
	// routed away: the bridge owns it locally.
	p.Routes = slices.DeleteFunc(p.Routes, func(r Route) bool {
		for _, s := range p.Subnets {
			if s.Overlaps(r.Dst) {
				errs = append(errs, fmt.Errorf("route %s overlaps this node's pod range %s: not routed", r, s))
				return true
			}
		}
		return false
	})
	slices.SortFunc(p.Routes, func(a, b Route) int {
		return cmp.Or(a.Dst.Addr().Compare(b.Dst.Addr()), cmp.Compare(a.Dst.Bits(), b.Dst.Bits()), a.Via.Compare(b.Via))
	})
	return p, errs
}

func prefixes(n Node) ([]netip.Prefix, error) {
	if len(n.PodCIDRs) == 0 {
		return nil, fmt.Errorf("node %q has no pod range yet", n.Name)
	}
	var out []netip.Prefix
	for _, c := range n.PodCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("node %q: pod range %q: %w", n.Name, c, err)
		}
		// IPv6 ranges of a dual-stack cluster are not routed (the kind
		// config here is IPv4); skip them rather than fail the node.
		if p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("node %q has no IPv4 pod range", n.Name)
	}
	return out, nil
}

// Conflist is the node's CNI configuration: a bridge (the node is the
// pods' gateway) with host-local addresses from the node's ranges, and
// portmap for hostPort. No masquerade: pods reach each other and the
// nodes with their own addresses, as the routes carry them.
func Conflist(p Plan) ([]byte, error) {
	if len(p.Subnets) == 0 {
		return nil, fmt.Errorf("no pod range: the node has not been given one yet")
	}
	ranges := make([][]map[string]string, 0, len(p.Subnets))
	for _, s := range p.Subnets {
		ranges = append(ranges, []map[string]string{{"subnet": s.String()}})
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "podnet",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": ranges,
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// ParseRoutes reads `ip -json -4 route show proto N`: the routes podnet
// installed earlier, so that the ones no longer planned are removed.
func ParseRoutes(b []byte) ([]Route, error) {
	var raw []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("ip route output: %w", err)
	}
	out := make([]Route, 0, len(raw))
	for _, r := range raw {
		dst, err := parseDst(r.Dst)
		if err != nil {
			return nil, fmt.Errorf("ip route output: destination %q: %w", r.Dst, err)
		}
		via, err := netip.ParseAddr(r.Gateway)
		if err != nil {
			return nil, fmt.Errorf("ip route output: gateway %q of %s: %w", r.Gateway, r.Dst, err)
		}
		out = append(out, Route{Dst: dst, Via: via})
	}
	return out, nil
}

// parseDst reads a route destination: ip prints a host route's without
// its /32.
func parseDst(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.ParsePrefix(s)
}

// Diff returns the routes to add or replace and the ones to delete to get
// from have to want.
func Diff(have, want []Route) (replace, remove []Route) {
	for _, w := range want {
		if !slices.Contains(have, w) {
			replace = append(replace, w)
		}
	}
	for _, h := range have {
		if !slices.ContainsFunc(want, func(w Route) bool { return w.Dst == h.Dst }) {
			remove = append(remove, h)
		}
	}
	return replace, remove
}
